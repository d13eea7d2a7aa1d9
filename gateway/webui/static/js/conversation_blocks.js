// The blocks a conversation is drawn with: bubbles, tool steps, thinking, todos, subagent task cards,
// questions, an answer's foot (`conversation.js` puts them together).

import { el, textOf } from "./dom.js";
import { highlightCode } from "./highlight.js";
import { icon } from "./icons.js";
import { renderMarkdown } from "./markdown.js";

const FILES_NOTE = /\n*\[Files sent with this message, now in the sandbox:[\s\S]*\]\s*$/;

export function kindOf(message) {
  const type = message.type || message.role;
  if (type === "human" || type === "user") return "human";
  if (type === "ai" || type === "assistant" || type === "AIMessageChunk") return "ai";
  if (type === "tool") return "tool";
  return type || "other";
}

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
export function markdownBlock(text) {
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
export function usagePerAnswer(messages) {
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

export function toolResults(messages) {
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

function toolStep(call, result, waiting) {
  const status = result ? (result.status === "error" ? "error" : "done") : waiting ? "waiting" : "running";
  const details = el(
    "details",
    { class: `step step-${status}`, "data-tool": call.name },
    el(
      "summary",
      {},
      el("span", { class: "step-icon", "aria-hidden": "true" }, icon({ running: "running", waiting: "waiting", error: "failed" }[status] || "done")),
      el("span", { class: "step-name", text: call.name }),
      el("span", { class: "step-arg", text: summarize(call) }),
      waiting && !result ? el("span", { class: "step-wait", text: "waits for your approval" }) : null,
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

export function thinkingBlock(text, streaming) {
  return el(
    "details",
    { class: "thinking", open: streaming },
    el("summary", { text: streaming ? "Thinking…" : "Thought" }),
    el("div", { class: "thinking-text", text }),
  );
}

export function humanBubble(message, foot = null) {
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

export function todoList(todos) {
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

export function taskCard(id, task) {
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

export function questionCard(request, answer) {
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
export function taskOf(conversation, call, result) {
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
export function latestPlan(conversation, messages) {
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
export function steps(conversation, calls, results, plan) {
  return calls.map((call) => {
    if (call.name === "task") return taskCard(call.id, taskOf(conversation, call, results.get(call.id)));
    if (call.name === "write_todos" && call.id === plan.id) return todoList(plan.todos);
    const waiting = conversation.approvals.some((request) => request.tool_call_id === call.id);
    return toolStep(call, results.get(call.id), waiting);
  });
}

/** Below a finished answer: copy, its token count, and the actions `hooks.answerFoot` gives. */
export function answerFootNode(message, streaming, usage, hooks) {
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
