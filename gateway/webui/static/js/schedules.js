// The schedules page (Settings → Schedules): the user's scheduled tasks with pause/resume, run now,
// delete and their history (each run linked to its conversation), and a form that builds a schedule
// from plain choices (an interval, a time on some weekdays, one moment, or a cron expression).

import { call } from "./api.js";
import { confirmInPage } from "./confirm.js";
import { el } from "./dom.js";

const q = encodeURIComponent;
const REFRESH_MS = 10_000; // how often an open Schedules page looks at its tasks again
const DAYS = [["1", "Mon"], ["2", "Tue"], ["3", "Wed"], ["4", "Thu"], ["5", "Fri"], ["6", "Sat"], ["0", "Sun"]];

export const schedules = {
  list: () => call("/scheduled-tasks"),
  get: (id) => call(`/scheduled-tasks/${q(id)}`),
  create: (task) => call("/scheduled-tasks", { method: "POST", json: task }),
  act: (id, action) => call(`/scheduled-tasks/${q(id)}/${action}`, { method: "POST" }),
  remove: (id) => call(`/scheduled-tasks/${q(id)}`, { method: "DELETE" }),
  runs: (id) => call(`/scheduled-tasks/${q(id)}/runs`),
};

/** A task's schedule in words. */
export function describe(task) {
  const spec = task.schedule_spec || {};
  if (task.schedule_type === "interval") return `every ${spec.every ?? `${spec.seconds}s`}`;
  if (task.schedule_type === "once") return `once at ${when(spec.run_at, task.timezone)}`;
  const fields = String(spec.cron || "").split(/\s+/);
  const [minute, hour, , , weekdays] = fields.length === 6 ? fields.slice(1) : fields;
  if (/^\d+$/.test(minute) && /^\d+$/.test(hour)) {
    const time = `${hour.padStart(2, "0")}:${minute.padStart(2, "0")}`;
    const names = Object.fromEntries(DAYS);
    const listed = /^[0-6](,[0-6])*$/.test(weekdays) ? weekdays.split(",").map((d) => names[d]).join(", ") : `days ${weekdays}`;
    const days = weekdays === "*" ? "every day" : weekdays === "1-5" ? "weekdays" : listed;
    return `${days} at ${time} (${task.timezone})`;
  }
  return `cron ${spec.cron} (${task.timezone})`;
}

/** A time as the browser's locale writes it; with `zone`, as read in that zone (and named). */
function when(iso, zone) {
  if (!iso) return "—";
  if (!zone) return new Date(iso).toLocaleString();
  const shown = { weekday: "short", year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZone: zone };
  try {
    return `${new Intl.DateTimeFormat(undefined, shown).format(new Date(iso))} (${zone})`;
  } catch {
    return new Date(iso).toLocaleString(); // a zone this browser does not know
  }
}

/** The builder's choices as DeerFlow's schedule_type and schedule_spec. */
function built(form) {
  const kind = form.elements.kind.value;
  if (kind === "interval") return ["interval", { every: `${form.elements.every.value}${form.elements.unit.value}` }];
  if (kind === "once") return ["once", { run_at: form.elements.at.value }];
  if (kind === "cron") return ["cron", { cron: form.elements.cron.value.trim() }];
  const [hour, minute] = (form.elements.time.value || "08:00").split(":").map(Number);
  const days = DAYS.filter(([n]) => form.elements[`day${n}`].checked).map(([n]) => n);
  const field = days.join(",") === "1,2,3,4,5" ? "1-5" : days.length && days.length < 7 ? days.join(",") : "*";
  return ["cron", { cron: `${minute} ${hour} * * ${field}` }];
}

function builder(onCreate) {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  const part = (kind, ...children) => el("div", { class: "row", "data-kind": kind }, ...children);
  // A <select> of [value, text] choices.
  const select = (name, label, choices) =>
    el("select", { name, "aria-label": label }, ...choices.map(([value, text]) => el("option", { value, text })));
  const kind = select("kind", "Repeat", [
    ["daily", "At a time of day"],
    ["interval", "Every …"],
    ["once", "Once"],
    ["cron", "Cron expression"],
  ]);
  const parts = [
    part(
      "daily",
      el("input", { type: "time", name: "time", value: "08:00", "aria-label": "Time" }),
      ...DAYS.map(([n, label]) =>
        el("label", { class: "day" }, el("input", { type: "checkbox", name: `day${n}`, checked: n !== "0" && n !== "6" }), label),
      ),
    ),
    part(
      "interval",
      el("input", { type: "number", name: "every", min: "1", value: "30", "aria-label": "Every" }),
      select("unit", "Unit", [
        ["m", "minutes"],
        ["h", "hours"],
        ["d", "days"],
        ["s", "seconds"],
      ]),
    ),
    part("once", el("input", { type: "datetime-local", name: "at", "aria-label": "When" })),
    part("cron", el("input", { type: "text", name: "cron", placeholder: "0 8 * * 1-5", "aria-label": "Cron expression" })),
  ];
  const show = () => parts.forEach((p) => (p.hidden = p.dataset.kind !== kind.value));
  kind.addEventListener("change", show);
  show();
  const form = el(
    "form",
    { class: "schedule-form" },
    el("input", { type: "text", name: "title", placeholder: "Title", "aria-label": "Title", required: true }),
    el("textarea", { name: "prompt", placeholder: "What should the agent do?", "aria-label": "Prompt", required: true }),
    el("div", { class: "row" }, kind, el("input", { type: "text", name: "timezone", value: zone, "aria-label": "Time zone" })),
    ...parts,
    el("button", { type: "submit", class: "primary", text: "Create schedule" }),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const [schedule_type, schedule_spec] = built(form);
    onCreate({
      title: form.elements.title.value.trim(),
      prompt: form.elements.prompt.value.trim(),
      context_mode: "fresh_thread_per_run",
      schedule_type,
      schedule_spec,
      timezone: form.elements.timezone.value.trim() || "UTC",
    });
  });
  return form;
}

async function history(task, box) {
  const runs = await schedules.runs(task.id);
  box.replaceChildren(
    runs.length
      ? el(
          "ul",
          { class: "history" },
          runs.map((run) =>
            el(
              "li",
              { "data-status": run.status },
              el("span", { text: `${when(run.scheduled_for)} · ${run.trigger} · ${run.status}` }),
              run.thread_id && run.run_id ? el("a", { href: `#/t/${run.thread_id}`, text: "open" }) : null,
              run.error ? el("span", { class: "muted", text: run.error }) : null,
            ),
          ),
        )
      : el("p", { class: "muted", text: "No runs yet." }),
  );
}

/** A card's line of figures: when it fires, next, and how often it has. */
function figures(task) {
  const runs = `${task.run_count} ${task.run_count === 1 ? "run" : "runs"}`;
  return `${describe(task)} · next ${task.status === "enabled" ? when(task.next_run_at, task.timezone) : "—"} · ${runs}`;
}

/** Show `task` as it is now in its card (its figures and status), wherever the page has it. */
function refreshCard(task) {
  const card = document.querySelector(`.card[data-task="${CSS.escape(task.id)}"]`);
  if (!card) return;
  card.querySelector(".task-figures").textContent = figures(task);
  card.querySelector(".badge").textContent = task.status;
}

/** Fire the task once now, then show its history until the new run is in it (the firing is async). */
async function runNow(task, box, toast) {
  try {
    const before = (await schedules.runs(task.id)).length;
    await schedules.act(task.id, "trigger");
    toast("Started");
    for (let i = 0; i < 30; i++) {
      await history(task, box);
      if (box.querySelectorAll("li").length > before) break;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    refreshCard(await schedules.get(task.id)); // its count went up: the card says so at once
  } catch (error) {
    toast(error.message, "error");
  }
}

/** While the page shows, its cards follow the tasks (a schedule fires by itself too). */
function follow(body) {
  clearInterval(follow.timer);
  follow.timer = setInterval(async () => {
    if (!body.isConnected || !body.querySelector(".cards")) return clearInterval(follow.timer);
    if (document.visibilityState !== "visible") return;
    try {
      for (const task of await schedules.list()) refreshCard(task);
    } catch {
      /* the next look tries again */
    }
  }, REFRESH_MS);
}

export async function schedulesPage(body, toast) {
  const tasks = await schedules.list();
  const redo = () => schedulesPage(body, toast).catch((error) => toast(error.message, "error"));
  const act = (promise, done) => promise.then(() => (toast(done), redo())).catch((error) => toast(error.message, "error"));
  const card = (task) => {
    const past = el("div", { class: "task-history" });
    const paused = task.status === "paused";
    return el(
      "li",
      { class: "card", "data-task": task.id },
      el("strong", { text: task.title }),
      el("span", { class: "badge", text: task.status }),
      el("p", { class: "muted task-figures", text: figures(task) }),
      el("p", { text: task.prompt }),
      el(
        "div",
        { class: "row" },
        el("button", { type: "button", text: paused ? "Resume" : "Pause", onclick: () => act(schedules.act(task.id, paused ? "resume" : "pause"), paused ? "Resumed" : "Paused") }),
        el("button", { type: "button", text: "Run now", onclick: () => runNow(task, past, toast) }),
        el("button", { type: "button", text: "History", onclick: () => history(task, past).catch((error) => toast(error.message, "error")) }),
        el("button", {
          type: "button",
          class: "danger",
          text: "Delete",
          onclick: async () => {
            if (await confirmInPage(`Delete the schedule "${task.title}"?`, "Delete")) act(schedules.remove(task.id), "Schedule deleted");
          },
        }),
      ),
      past,
    );
  };
  body.replaceChildren(
    el("h2", { text: "Schedules" }),
    el("p", { class: "muted", text: "Prompts the agent runs on a schedule, each run in a new conversation. /schedule typed in a conversation (here or in a chat) makes one that answers there." }),
    tasks.length ? el("ul", { class: "cards" }, tasks.map(card)) : el("p", { class: "muted", text: "No schedules yet." }),
    el("h3", { text: "New schedule" }),
    builder((task) => act(schedules.create(task), "Schedule created")),
  );
  follow(body);
}
