// Goal mode: the open thread's goal above the composer (set, shown, cleared), how far its loop got,
// and `/goal` typed in the composer (as in chats: `/goal <text>` sets it and sends the text on,
// `/goal` shows it, `/goal clear` clears it). Setting it in the bar does what `/goal <text>` does:
// the goal is set and its first step starts, and the page says what happens next.
//
// The runner judges each run against the goal and starts the next run itself; a run's `end` event
// says so (`data.goal`: verdict, next step, the next run's id). The page follows that next run like
// any other, so a goal's progress streams in as it happens.

import { call } from "./api.js";
import { el } from "./dom.js";
import { icon } from "./icons.js";

const q = encodeURIComponent;
export const CLEAR_WORDS = new Set(["clear", "reset", "off"]);
const STOPPED = {
  max_continuations: "stopped at its limit of runs",
  no_progress: "stopped: no progress",
  cancelled: "stopped: cancelled",
  run_failed: "stopped: could not be judged",
  blocked: "waiting for your answer",
};

export const goals = {
  get: (id) => call(`/threads/${q(id)}/goal`),
  set: (id, objective) => call(`/threads/${q(id)}/goal`, { method: "PUT", json: { objective } }),
  clear: (id) => call(`/threads/${q(id)}/goal`, { method: "DELETE" }),
};

const bar = { threadId: null, goal: null, progress: "", editing: false, onToast: () => {}, start: null };

/** What happens once a goal is set, in words (the bar's title, and the note `/goal` leaves). */
export function whatHappensNext(goal, running = false) {
  const steps = goal?.max_continuations ? `at most ${goal.max_continuations} more steps` : "a few more steps";
  const first = running ? "Once the answer being written ends, Antler checks it" : "Antler starts on it now; after each answer it checks";
  return `${first} against the goal and goes on by itself (${steps}) until the goal is reached or it needs you. Stop ends the loop; /goal clear removes the goal.`;
}

/** The open thread's goal (null: none). */
export function currentGoal() {
  return bar.goal;
}

/** How the bar starts a goal: `start(objective)` sets it and sends it on, as `/goal <objective>` does. */
export function wireGoal(start) {
  bar.start = start;
}

function box() {
  let node = document.getElementById("goal-bar");
  if (!node) {
    node = el("div", { id: "goal-bar", class: "goal-bar", "aria-label": "Goal" });
    const composer = document.getElementById("composer");
    composer.prepend(node);
  }
  return node;
}

function drawBar() {
  const node = box();
  const goal = bar.goal;
  if (bar.editing) {
    const input = el("input", { id: "goal-input", type: "text", placeholder: "What should be done, in the end?", "aria-label": "Goal" });
    const save = async () => {
      const objective = input.value.trim();
      if (!objective) return;
      // As `/goal <objective>`: set, and the objective sent as the first step (a goal set alone
      // would wait, silently, for a message to judge).
      if (bar.start) await bar.start(objective);
      else await setGoal(bar.threadId, objective);
    };
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") (event.preventDefault(), save()); // not the composer's submit
      if (event.key === "Escape") ((bar.editing = false), drawBar());
    });
    node.replaceChildren(
      input,
      el("button", { id: "goal-save", type: "button", class: "primary", text: "Set goal", onclick: save }),
      el("button", { type: "button", text: "Cancel", onclick: () => ((bar.editing = false), drawBar()) }),
    );
    input.focus();
    return;
  }
  if (!goal) {
    node.replaceChildren(
      el("button", { id: "goal-open", type: "button", class: "goal-open", title: "Antler works toward it by itself, step by step", onclick: () => ((bar.editing = true), drawBar()) }, icon("goal"), " Set a goal"),
    );
    return;
  }
  const counter = goal.continuation_count ? ` · ${goal.continuation_count}/${goal.max_continuations}` : "";
  node.replaceChildren(
    el("span", { class: "goal-label" }, icon("goal"), " Goal"),
    el("span", { id: "goal-objective", class: "goal-objective", text: goal.objective, title: goal.objective }),
    el("span", { id: "goal-progress", class: "goal-progress muted", text: `${bar.progress || "working on it"}${counter}`, title: whatHappensNext(goal) }),
    el("button", { id: "goal-clear", type: "button", text: "Clear", onclick: () => clearGoal(bar.threadId) }),
  );
}

/** The open thread changed (`isNew`: not created yet, so it has no goal): show its goal. */
export async function showGoal(threadId, isNew, onToast) {
  Object.assign(bar, { threadId, goal: null, progress: "", editing: false });
  if (onToast) bar.onToast = onToast;
  drawBar();
  if (isNew) return;
  try {
    const { goal } = await goals.get(threadId);
    if (bar.threadId === threadId) ((bar.goal = goal), drawBar());
  } catch {
    /* no goal shown: the bar still offers to set one */
  }
}

async function setGoal(threadId, objective) {
  try {
    const { goal } = await goals.set(threadId, objective);
    if (bar.threadId === threadId) Object.assign(bar, { goal, editing: false, progress: "" });
    drawBar();
    return true;
  } catch (error) {
    bar.onToast(`Could not set the goal: ${error.message}`, "error");
    return false;
  }
}

async function clearGoal(threadId) {
  try {
    await goals.clear(threadId);
    if (bar.threadId === threadId) Object.assign(bar, { goal: null, progress: "" });
    drawBar();
  } catch (error) {
    bar.onToast(`Could not clear the goal: ${error.message}`, "error");
  }
}

/**
 * A run of `threadId` ended with a goal outcome (its `end` event's `data.goal`): show how the loop
 * stands; the id of the run the runner started next, which the page then follows (or null).
 */
export function goalEnded(threadId, outcome) {
  if (!outcome || typeof outcome !== "object") return null;
  if (bar.threadId === threadId) {
    if (outcome.verdict === "done") Object.assign(bar, { goal: null, progress: "" });
    else if (bar.goal) {
      bar.goal = { ...bar.goal, continuation_count: outcome.continuation ?? bar.goal.continuation_count };
      bar.progress = outcome.next_run_id
        ? `continuing — next: ${outcome.next_step || "…"}`
        : STOPPED[outcome.stopped] || "stopped";
    }
    drawBar();
    if (outcome.verdict === "done") bar.onToast("Goal reached.");
  }
  return outcome.next_run_id || null;
}

/**
 * `/goal` typed in the composer (`argument`: what follows it), answered with `say(text)`. Returns
 * the text to send on (the objective of `/goal <text>`, the goal's first step), or null.
 */
export async function goalCommand(threadId, argument, say, running = false) {
  argument = argument.trim();
  if (!argument) {
    say(bar.goal ? `Goal: ${bar.goal.objective}${bar.progress ? ` (${bar.progress})` : ""}` : "No active goal. Set one with /goal <what you want done>.");
    return null;
  }
  if (CLEAR_WORDS.has(argument.toLowerCase())) {
    await clearGoal(threadId);
    say("Goal cleared.");
    return null;
  }
  bar.threadId = threadId;
  if (!(await setGoal(threadId, argument))) return null;
  say(`Goal set: ${argument}\n${whatHappensNext(bar.goal, running)}`);
  return argument;
}
