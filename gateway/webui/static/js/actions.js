// The actions under an answer and a message — regenerate, edit and resend, branch, thumbs up or
// down — and subagent cards rebuilt from the runs' journals after a reload.
//
// Regenerate and edit ask the gateway to `prepare` (the input, the checkpoint before the turn and
// the run's metadata) and stream that as a run, as DeerFlow's UI does; the thread's state then
// holds the new turn, the old one stays in its history. Which run wrote which message comes from
// `/messages/page` (its `run_id`), the rating of each run from the runs list.

import { call } from "./api.js";
import { el, textOf } from "./dom.js";
import { icon } from "./icons.js";

const q = encodeURIComponent;
const CARD_EVENTS = "subagent.start,subagent.step,subagent.end";
const RUNS_LOOKED_AT = 20; // the newest runs whose journals rebuild subagent cards

export const runActions = {
  regenerate: (threadId, messageId) =>
    call(`/threads/${q(threadId)}/runs/regenerate/prepare`, { method: "POST", json: { message_id: messageId } }),
  edit: (threadId, humanId, text) =>
    call(`/threads/${q(threadId)}/runs/edit-regenerate/prepare`, {
      method: "POST",
      json: { human_message_id: humanId, replacement_text: text },
    }),
  branch: (threadId, messageId) => call(`/threads/${q(threadId)}/branches`, { method: "POST", json: { message_id: messageId } }),
  rate: (threadId, runId, rating) => call(`/threads/${q(threadId)}/runs/${q(runId)}/feedback`, { method: "PUT", json: { rating } }),
  unrate: (threadId, runId) => call(`/threads/${q(threadId)}/runs/${q(runId)}/feedback`, { method: "DELETE" }),
};

const kind = (m) => (m.type === "user" ? "human" : m.type === "assistant" ? "ai" : m.type);

/** The body of the run that carries out a prepared regenerate or edit. */
export function replayStart(prepared, base) {
  return { ...base, input: prepared.input, checkpoint: prepared.checkpoint, metadata: prepared.metadata };
}

/**
 * Which run wrote each message, each run's rating, and the subagent cards of recent runs (their
 * steps too) from the runs' journals, into `conversation` (`runOf`, `ratings`, `tasks`).
 */
export async function loadRunHistory(conversation) {
  const id = conversation.threadId;
  const [page, runs] = await Promise.all([
    call(`/threads/${q(id)}/messages/page?limit=200`),
    call(`/threads/${q(id)}/runs?limit=${RUNS_LOOKED_AT}`),
  ]);
  conversation.runOf = new Map((page?.data || []).filter((r) => r.run_id).map((r) => [r.content?.id, r.run_id]));
  conversation.ratings = new Map((runs || []).map((r) => [r.run_id, r.feedback?.rating || 0]));
  const called = new Set(conversation.messages().flatMap((m) => (m.tool_calls || []).filter((c) => c.name === "task").map((c) => c.id)));
  if (!called.size) return;
  const ended = (runs || []).filter((r) => !["pending", "running"].includes(r.status));
  const journals = await Promise.all(
    ended.map((r) => call(`/threads/${q(id)}/runs/${q(r.run_id)}/events?event_types=${CARD_EVENTS}&limit=2000`).catch(() => [])),
  );
  const restored = new Set();
  for (const row of journals.flat()) {
    const taskId = row.content?.task_id;
    if (!called.has(taskId) || (conversation.tasks.has(taskId) && !restored.has(taskId))) continue; // live ones stay
    restored.add(taskId);
    const task = conversation.tasks.get(taskId) || { description: "", status: "running", steps: [] };
    if (row.event_type === "subagent.start") Object.assign(task, { description: row.content.description || task.description, steps: [] });
    else if (row.event_type === "subagent.step") task.steps.push(row.content.text || "");
    else {
      task.status = row.content.status;
      if (row.content.result) task.result = row.content.result;
      if (row.content.error) task.error = row.content.error;
    }
    conversation.tasks.set(taskId, task);
  }
}

function button(label, name, onclick, pressed) {
  const attrs = { type: "button", class: "act", "aria-label": label, title: label, onclick };
  if (pressed !== undefined) attrs["aria-pressed"] = pressed ? "true" : "false";
  return el("button", attrs, icon(name));
}

/** The latest answer and the latest user message with an answer after it (the ones that may be redone). */
function latestTurn(messages) {
  let human = null;
  let answer = null;
  for (const m of messages) {
    if (kind(m) === "human" && !m.additional_kwargs?.hide_from_ui) {
      human = m;
      answer = null;
    } else if (kind(m) === "ai" && textOf(m.content) && !(m.tool_calls || []).length) answer = m;
  }
  return { human, answer };
}

/** What decides the feet below: redrawn when it changes. */
export function footKey(conversation, message) {
  const { human, answer } = latestTurn(conversation.messages());
  const run = conversation.runOf?.get(message.id);
  return [conversation.running, message.id === human?.id, message.id === answer?.id, run, conversation.ratings?.get(run)].join(":");
}

/** Buttons under an answer: regenerate (the latest), branch, thumbs up and down (once its run is known). */
export function answerFoot(conversation, message, act) {
  if (conversation.running || !message.id || message.id.startsWith("live-")) return [];
  const { answer } = latestTurn(conversation.messages());
  const run = conversation.runOf?.get(message.id);
  const rating = conversation.ratings?.get(run) || 0;
  return [
    message.id === answer?.id ? button("Regenerate this answer", "regenerate", () => act.regenerate(message)) : null,
    button("Branch from here", "branch", () => act.branch(message)),
    run ? button("Good answer", "good", () => act.rate(run, rating === 1 ? 0 : 1), rating === 1) : null,
    run ? button("Bad answer", "bad", () => act.rate(run, rating === -1 ? 0 : -1), rating === -1) : null,
  ];
}

/** Under the latest user message of a finished turn: edit it and send it again. */
export function humanFoot(conversation, message, act) {
  if (conversation.running || !message.id || message.id.startsWith("local-")) return null;
  const { human, answer } = latestTurn(conversation.messages());
  if (message.id !== human?.id || !answer) return null;
  return el("div", { class: "msg-foot human-foot" }, button("Edit and resend", "edit", (event) => editInPlace(event.currentTarget, message, act)));
}

function editInPlace(origin, message, act) {
  const bubble = origin.closest(".msg-human");
  const box = el("textarea", { class: "edit-box", "aria-label": "Edited message", rows: 3 });
  box.value = textOf(message.content);
  const form = el(
    "form",
    { class: "edit-form" },
    box,
    el(
      "div",
      { class: "edit-buttons" },
      el("button", { type: "button", text: "Cancel", onclick: () => act.redraw(true) }),
      el("button", { type: "submit", class: "primary", text: "Send edited" }),
    ),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (box.value.trim()) act.edit(message, box.value.trim());
  });
  bubble.replaceChildren(form);
  box.focus();
}

/** The conversation without the turn a regenerate (`from: "answer"`) or an edit (`"human"`) replaces. */
export function dropLatestTurn(conversation, from) {
  const { human } = latestTurn(conversation.messages());
  const at = conversation.base.findIndex((m) => m.id === human?.id);
  if (at < 0) return;
  conversation.base = conversation.base.slice(0, from === "human" ? at : at + 1);
  conversation.values = { ...conversation.values, messages: conversation.base };
  conversation.live.clear();
  conversation.pinned = [];
}
