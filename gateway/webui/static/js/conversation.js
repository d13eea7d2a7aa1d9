// One thread's conversation: its messages (from the thread's state and the run's stream), todos,
// artifacts and subagent tasks, and how they are drawn.
//
// The thread's `values` are the truth; `messages` events bring what is not in them yet (the answer
// being written, deltas per message id). Model output is drawn as sanitized Markdown; the user's
// own words as plain text.

import { el, textOf } from "./dom.js";
import { highlightCode } from "./highlight.js";
import { icon } from "./icons.js";
import { isSummary, summaryBlock } from "./compact.js";
import { renderMarkdown } from "./markdown.js";
import { modelNotice, noteModelEvent } from "./model_notices.js";
import { noteBlock } from "./notes.js";

const FILES_NOTE = /\n*\[Files sent with this message, now in the sandbox:[\s\S]*\]\s*$/;

function kindOf(message) {
  const type = message.type || message.role;
  if (type === "human" || type === "user") return "human";
  if (type === "ai" || type === "assistant" || type === "AIMessageChunk") return "ai";
  if (type === "tool") return "tool";
  return type || "other";
}

function parseArgs(args) {
  if (typeof args !== "string") return args || {};
  try {
    return JSON.parse(args);
  } catch {
    return { input: args };
  }
}

export class Conversation {
  constructor(threadId) {
    this.threadId = threadId;
    this.base = []; // messages of the thread's values
    this.live = new Map(); // id -> message built from the stream, not (yet) in values
    this.pinned = []; // {anchor, message}: what a run that ended early wrote, after the message it followed
    this.reasoning = new Map(); // id -> streamed reasoning text (kept after the message lands)
    this.values = {};
    this.tasks = new Map(); // task_id -> {description, status, message, result, error}
    this.error = null;
    this.stopped = false; // the last run was stopped (by the user): a marker, not an error
    this.running = false;
  }

  /** The thread's state values (on load, and each `values` event). */
  setValues(values) {
    this.values = values || {};
    this.base = Array.isArray(this.values.messages) ? this.values.messages : [];
    // The message the user just sent is shown at once; the thread's own copy replaces it.
    const sent = new Set(this.base.filter((m) => kindOf(m) === "human").map((m) => textOf(m.content)));
    for (const [id, message] of this.live) {
      if (id.startsWith("local-") && sent.has(textOf(message.content))) this.live.delete(id);
    }
    for (const message of this.base) {
      if (message.id) this.live.delete(message.id);
      const reasoning = message.additional_kwargs?.reasoning_content;
      if (reasoning && !this.reasoning.has(message.id)) this.reasoning.set(message.id, reasoning);
    }
  }

  /** One `messages` event (messages-tuple): a delta of an AI message, or a whole message. */
  addMessage(message) {
    const id = message.id || `live-${this.live.size}`;
    if (this.base.some((m) => m.id === id)) return;
    if (message.type !== "AIMessageChunk") {
      this.live.set(id, message);
      return;
    }
    const current = this.live.get(id) || { type: "ai", id, content: "", tool_calls: [], additional_kwargs: {} };
    current.content = textOf(current.content) + textOf(message.content);
    const thought = message.additional_kwargs?.reasoning_content;
    if (thought) this.reasoning.set(id, (this.reasoning.get(id) || "") + thought);
    for (const chunk of message.tool_call_chunks || []) {
      if (chunk.name) current.tool_calls.push({ id: chunk.id, name: chunk.name, args: parseArgs(chunk.args) });
    }
    for (const call of message.tool_calls || []) {
      if (call.name && !current.tool_calls.some((c) => c.id === call.id)) current.tool_calls.push(call);
    }
    this.live.set(id, current);
  }

  /** One `custom` event: subagent task progress cards. */
  addCustom(data) {
    if (noteModelEvent(this, data)) return;
    if (!data || typeof data.type !== "string" || !data.type.startsWith("task_")) return;
    const task = this.tasks.get(data.task_id) || { description: data.description || "", status: "running" };
    const status = data.type.slice("task_".length);
    task.status = status === "started" ? "running" : status;
    if (data.description) task.description = data.description;
    if (data.message) task.message = textOf(data.message.content ?? data.message);
    if (data.type === "task_running" && data.message) {
      task.steps = task.steps || [];
      task.steps[data.message_index ?? task.steps.length] = task.message;
    }
    if (data.result) task.result = data.result;
    if (data.error) task.error = data.error;
    this.tasks.set(data.task_id, task);
  }

  /**
   * A run ended early: what it wrote (not in the thread's state) stays where it was written, after
   * the thread's message it followed, even as later turns are added below it.
   */
  pin() {
    const anchor = this.base.length ? this.base[this.base.length - 1].id : null;
    for (const [id, message] of this.live) {
      if (id.startsWith("local-")) continue;
      this.pinned.push({ anchor, message });
      this.live.delete(id);
    }
  }

  messages() {
    if (!this.pinned.length) return [...this.base, ...this.live.values()];
    const placed = [];
    const pinned = this.pinned.filter((p) => !this.base.some((m) => m.id && m.id === p.message.id));
    const after = (anchor) => pinned.filter((p) => p.anchor === anchor).map((p) => p.message);
    placed.push(...after(null));
    for (const message of this.base) placed.push(message, ...(message.id ? after(message.id) : []));
    const anchors = new Set(this.base.map((m) => m.id));
    placed.push(...pinned.filter((p) => p.anchor !== null && !anchors.has(p.anchor)).map((p) => p.message));
    return [...placed, ...this.live.values()];
  }

  get title() {
    return this.values.title || "";
  }

  /** The open clarification request (the last message is an ask_clarification answer), if any. */
  openQuestion() {
    const all = this.messages();
    const last = all[all.length - 1];
    if (!last || kindOf(last) !== "tool" || last.name !== "ask_clarification") return null;
    return last.artifact?.human_input || { question: textOf(last.content), request_id: last.tool_call_id, source: "ask_clarification" };
  }
}

// ------------------------------------------------------------------ drawing

/** A button that copies `text()` to the clipboard and says so. */
export function copyButton(label, text) {
  const button = el("button", { type: "button", class: "copy", "aria-label": label, text: "Copy" });
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text());
      button.textContent = "Copied";
    } catch {
      button.textContent = "Copy failed";
    }
    setTimeout(() => (button.textContent = "Copy"), 1500);
  });
  return button;
}

/** Model Markdown, each code block coloured, under a bar with its language and a copy button. */
function markdownBlock(text) {
  const fragment = renderMarkdown(text);
  for (const code of fragment.querySelectorAll("pre > code")) {
    const language = [...code.classList].find((c) => c.startsWith("language-"))?.slice("language-".length) || "text";
    highlightCode(code, language);
    const pre = code.parentElement;
    const bar = el("div", { class: "code-bar" }, el("span", { class: "code-lang", text: language }), copyButton("Copy code", () => code.textContent));
    pre.replaceWith(el("div", { class: "code" }, bar, pre.cloneNode(true)));
  }
  return el("div", { class: "md" }, fragment);
}

function clock(iso) {
  const when = new Date(iso);
  if (Number.isNaN(when.getTime())) return "";
  const sameDay = when.toDateString() === new Date().toDateString();
  return sameDay ? when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : when.toLocaleString([], { dateStyle: "short", timeStyle: "short" });
}

/** Tokens per answer: each turn's AI messages summed, keyed by the turn's last AI message with text. */
function usagePerAnswer(messages) {
  const totals = new Map();
  let sum = 0;
  let last = null;
  const close = () => {
    if (last && sum) totals.set(last, sum);
    sum = 0;
    last = null;
  };
  for (const message of messages) {
    const kind = kindOf(message);
    if (kind === "human") close();
    if (kind !== "ai") continue;
    sum += message.usage_metadata?.total_tokens || 0;
    if (textOf(message.content)) last = message.id;
  }
  close();
  return totals;
}

function toolResults(messages) {
  const results = new Map();
  for (const m of messages) if (kindOf(m) === "tool" && m.tool_call_id) results.set(m.tool_call_id, m);
  return results;
}

function summarize(call) {
  const args = call.args || {};
  const first = args.description || args.command || args.path || args.query || args.url || args.prompt;
  if (first) return String(first).split("\n")[0].slice(0, 120);
  const text = JSON.stringify(args);
  return text === "{}" ? "" : text.slice(0, 120);
}

function toolStep(call, result) {
  const status = !result ? "running" : result.status === "error" ? "error" : "done";
  const details = el(
    "details",
    { class: `step step-${status}`, "data-tool": call.name },
    el(
      "summary",
      {},
      el("span", { class: "step-icon", "aria-hidden": "true" }, icon(status === "running" ? "running" : status === "error" ? "failed" : "done")),
      el("span", { class: "step-name", text: call.name }),
      el("span", { class: "step-arg", text: summarize(call) }),
    ),
    el("div", { class: "step-label", text: "Input" }),
    el("pre", { class: "step-io", text: JSON.stringify(call.args ?? {}, null, 2) }),
  );
  // Opened near the bottom, the step scrolls up so its result shows above the composer.
  details.addEventListener("toggle", () => {
    const pane = details.closest(".messages");
    if (!details.open || !pane) return;
    const box = pane.getBoundingClientRect();
    const step = details.getBoundingClientRect();
    if (step.bottom > box.bottom) pane.scrollTop += Math.min(step.bottom - box.bottom, step.top - box.top);
  });
  if (result) {
    details.append(
      el("div", { class: "step-label", text: "Result" }),
      el("pre", { class: "step-io", text: textOf(result.content).slice(0, 20000) }),
    );
  }
  return details;
}

function thinkingBlock(text, streaming) {
  return el(
    "details",
    { class: "thinking", open: streaming },
    el("summary", { text: streaming ? "Thinking…" : "Thought" }),
    el("div", { class: "thinking-text", text }),
  );
}

function humanBubble(message, foot = null) {
  const response = message.additional_kwargs?.human_input_response;
  let text = response ? response.value : textOf(message.content);
  const files = message.additional_kwargs?.files || [];
  if (files.length) text = text.replace(FILES_NOTE, "");
  return el(
    "div",
    { class: "msg msg-human" },
    el(
      "div",
      { class: "bubble" },
      el("div", { class: "plain", text }), // the user's words, never interpreted as HTML
      files.length
        ? el("div", { class: "chips" }, files.map((f) => el("span", { class: "chip", text: f.filename })))
        : null,
    ),
    message.additional_kwargs?.sent_at
      ? el("time", { class: "msg-time", datetime: message.additional_kwargs.sent_at, text: clock(message.additional_kwargs.sent_at) })
      : null,
    foot,
  );
}

function todoList(todos) {
  const mark = { completed: "todo-done", in_progress: "todo-doing", pending: "todo" };
  return el(
    "section",
    { class: "todos", "aria-label": "Plan" },
    el("h3", { text: "Plan" }),
    el(
      "ul",
      {},
      todos.map((t) => el("li", { class: `todo todo-${t.status}` }, icon(mark[t.status] || "todo"), " ", el("span", { text: t.content }))),
    ),
  );
}

function taskCard(id, task) {
  const label = { running: "Working", completed: "Done", failed: "Failed", cancelled: "Cancelled", timed_out: "Timed out" };
  return el(
    "div",
    { class: `task task-${task.status}`, "data-task": id },
    el("div", { class: "task-head" }, el("span", { class: "task-status", text: label[task.status] || task.status }), el("span", { class: "task-desc", text: task.description })),
    task.message && task.status === "running" ? el("div", { class: "task-msg", text: task.message.slice(0, 300) }) : null,
    task.steps?.filter(Boolean).length
      ? el("details", { class: "task-steps" }, el("summary", { text: `Steps (${task.steps.filter(Boolean).length})` }), el("ol", {}, task.steps.filter(Boolean).map((text) => el("li", { class: "task-step", text: text.slice(0, 600) }))))
      : null,
    task.result ? el("details", {}, el("summary", { text: "Result" }), markdownBlock(task.result)) : null,
    task.error ? el("div", { class: "task-err", text: task.error }) : null,
  );
}

function questionCard(request, answer) {
  const options = request.options || [];
  const form = el("form", { class: "question-other" });
  const input = el("input", { type: "text", placeholder: options.length ? "Or type another answer" : "Your answer", "aria-label": "Your answer" });
  form.append(input, el("button", { type: "submit", class: "primary", text: "Answer" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (input.value.trim()) answer(request, { response_kind: "text", value: input.value.trim() });
  });
  return el(
    "div",
    { class: "question", role: "group", "aria-label": "Question from the agent" },
    request.context ? el("div", { class: "muted", text: request.context }) : null,
    el("div", { class: "question-text", text: request.question }),
    el(
      "div",
      { class: "choices" },
      options.map((o) =>
        el("button", { type: "button", class: "choice", text: o.label, onclick: () => answer(request, { response_kind: "option", option_id: o.id, value: o.value }) }),
      ),
    ),
    form,
  );
}

/**
 * Draw the conversation into `root`. `hooks.answer(request, response)` answers a clarification.
 * Finished messages keep their nodes (so open steps stay open); the one being written is redrawn.
 */
/**
 * A subagent task's card: its live progress (custom events) while known, else what its tool call and
 * result say (after a reload, custom events are gone but the `task` call and its result stay).
 */
function taskOf(conversation, call, result) {
  const live = conversation.tasks.get(call.id);
  if (live) return live;
  const kwargs = result?.additional_kwargs || {};
  const status = !result ? (conversation.running ? "running" : "cancelled") : kwargs.subagent_status || (result.status === "error" ? "failed" : "completed");
  const task = { description: call.args?.description || "", status };
  if (kwargs.subagent_result_brief) task.result = kwargs.subagent_result_brief;
  if (kwargs.subagent_error || (result?.status === "error" && !kwargs.subagent_status)) task.error = kwargs.subagent_error || textOf(result.content);
  return task;
}

/** The plan as the model last wrote it (its latest `write_todos`), and that call's id. */
function latestPlan(conversation, messages) {
  for (let i = messages.length - 1; i >= 0; i--) {
    const calls = messages[i].tool_calls || [];
    for (let j = calls.length - 1; j >= 0; j--) {
      if (calls[j].name === "write_todos" && Array.isArray(calls[j].args?.todos)) return { id: calls[j].id, todos: calls[j].args.todos };
    }
  }
  const todos = conversation.values.todos;
  return { id: null, todos: Array.isArray(todos) ? todos : [] };
}

/** A message's tool calls in place: subagent tasks as cards, the latest plan as the plan card. */
function steps(conversation, calls, results, plan) {
  return calls.map((call) => {
    if (call.name === "task") return taskCard(call.id, taskOf(conversation, call, results.get(call.id)));
    if (call.name === "write_todos" && call.id === plan.id) return todoList(plan.todos);
    return toolStep(call, results.get(call.id));
  });
}

/** Below a finished answer: copy, its token count, and the actions `hooks.answerFoot` gives. */
function answerFootNode(message, streaming, usage, hooks) {
  const text = textOf(message.content);
  if (!text || streaming) return null;
  const tokens = usage.get(message.id);
  return el(
    "div",
    { class: "msg-foot" },
    copyButton("Copy answer", () => text),
    tokens ? el("span", { class: "msg-usage", text: `${tokens.toLocaleString()} tokens` }) : null,
    hooks.answerFoot?.(message),
  );
}

export function draw(conversation, root, hooks, cache) {
  const messages = conversation.messages();
  const results = toolResults(messages);
  const plan = latestPlan(conversation, messages);
  const usage = usagePerAnswer(messages);
  const nodes = [];
  const streamingId = conversation.running ? [...conversation.live.keys()].pop() : null;
  messages.forEach((message, index) => {
    const kind = kindOf(message);
    if (kind === "tool" || kind === "system" || kind === "other") return;
    if (kind === "human" && message.additional_kwargs?.hide_from_ui && !message.additional_kwargs?.human_input_response) return;
    const calls = message.tool_calls || [];
    const reasoning = conversation.reasoning.get(message.id) || "";
    const key = `${message.id || index}`;
    const cards = calls
      .filter((c) => c.name === "task" || c.id === plan.id)
      .map((c) => JSON.stringify(c.name === "task" ? taskOf(conversation, c, results.get(c.id)) : plan.todos));
    const streaming = message.id === streamingId;
    const signature = [kind, streaming, textOf(message.content).length, reasoning.length, calls.map((c) => `${c.id}:${results.has(c.id)}`).join(","), ...cards].join("|");
    // The buttons and token count below a message change on their own (the run ends, its id or
    // usage arrives): only the foot is redrawn then, so the message a reader is looking at (or
    // selecting text in) stays the same node.
    const footSignature = [hooks.footKey?.(message) ?? "", usage.get(message.id)].join("|");
    const foot = () =>
      kind === "note" ? null : kind === "human" ? (isSummary(message) ? null : hooks.humanFoot?.(message)) : answerFootNode(message, streaming, usage, hooks);
    const hit = cache.get(key);
    if (hit && hit.signature === signature) {
      if (hit.footSignature !== footSignature) {
        hit.node.querySelector(":scope > .msg-foot")?.remove();
        const fresh = foot();
        if (fresh) hit.node.append(fresh);
        hit.footSignature = footSignature;
      }
      nodes.push(hit.node);
      return;
    }
    let node;
    if (kind === "note") {
      node = noteBlock(message, el);
    } else if (kind === "human" && isSummary(message)) {
      node = summaryBlock(message, el, textOf(message.content));
    } else if (kind === "human") {
      node = humanBubble(message, foot());
    } else {
      const text = textOf(message.content);
      node = el(
        "div",
        { class: `msg msg-ai${streaming ? " streaming" : ""}` },
        reasoning ? thinkingBlock(reasoning, streaming && !text) : null,
        text ? markdownBlock(text) : null,
        calls.length ? el("div", { class: "steps" }, steps(conversation, calls, results, plan)) : null,
        foot(),
      );
      if (!text && !calls.length && !reasoning) return;
    }
    if (hit) {
      // Keep the reader's open/closed choice of the steps and thinking blocks.
      const open = [...hit.node.querySelectorAll("details")].map((d) => d.open);
      node.querySelectorAll("details").forEach((d, i) => {
        if (i < open.length) d.open = open[i];
      });
    }
    cache.set(key, { signature, footSignature, node });
    nodes.push(node);
  });
  const extras = [];
  // The plan and the tasks sit with the calls that made them; only what no message holds is here.
  if (plan.id === null && plan.todos.length) extras.push(todoList(plan.todos));
  const called = new Set(messages.flatMap((m) => (m.tool_calls || []).map((c) => c.id)));
  const loose = [...conversation.tasks].filter(([id]) => !called.has(id));
  if (loose.length) extras.push(el("div", { class: "tasks" }, loose.map(([id, t]) => taskCard(id, t))));
  const question = !conversation.running && conversation.openQuestion();
  if (question) extras.push(questionCard(question, hooks.answer));
  const suggestions = !conversation.running && !question ? conversation.suggestions || [] : [];
  if (suggestions.length) {
    extras.push(
      el(
        "div",
        { class: "suggestions", "aria-label": "Suggested follow-ups" },
        suggestions.map((text) => el("button", { type: "button", class: "suggestion", text, onclick: () => hooks.suggestion(text) })),
      ),
    );
  }
  if (conversation.running && !streamingId) extras.push(el("div", { class: "msg msg-ai pending", "aria-label": "Working" }, el("span", { class: "dots" })));
  const notice = modelNotice(conversation);
  if (notice) extras.push(notice);
  if (conversation.error) extras.push(el("div", { class: "run-error", role: "alert", text: conversation.error }));
  else if (conversation.stopped) extras.push(el("div", { class: "run-note", text: "Stopped before the answer was finished." }));
  root.replaceChildren(...nodes, ...extras);
}
