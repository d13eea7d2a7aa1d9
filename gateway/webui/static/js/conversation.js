// One thread's conversation: its messages (from the thread's state and the run's stream), todos,
// artifacts and subagent tasks, and how they are drawn.
//
// The thread's `values` are the truth; `messages` events bring what is not in them yet (the answer
// being written, deltas per message id). Model output is drawn as sanitized Markdown; the user's
// own words as plain text.

import { approvalCard, waitingIn } from "./approvals.js";
import { el, textOf } from "./dom.js";
import { isSummary, summaryBlock } from "./compact.js";
import { modelNotice, noteModelEvent } from "./model_notices.js";
import { noteBlock } from "./notes.js";
import {
  answerFootNode,
  copyButton,
  humanBubble,
  kindOf,
  latestPlan,
  markdownBlock,
  questionCard,
  steps,
  taskCard,
  taskOf,
  thinkingBlock,
  todoList,
  toolResults,
  usagePerAnswer,
} from "./conversation_blocks.js";

export { copyButton };

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
    this.approvals = []; // the tool calls the thread waits to have approved (its state's interrupts)
    this.answered = new Map(); // approval_id -> the resume sent for it from this page
  }

  /** The thread's state (`GET /threads/{id}/state`): its values and what waits for approval. */
  setState(threadState) {
    this.setValues(threadState?.values);
    this.approvals = waitingIn(threadState);
  }

  /** The thread's state values (on load, and each `values` event). */
  setValues(values) {
    this.values = values || {};
    // The gateway adds a card message per waiting approval for DeerFlow's UI (display only): this
    // page draws its own approval card from the state's interrupts.
    const messages = Array.isArray(this.values.messages) ? this.values.messages : [];
    this.base = messages.filter((m) => !m.additional_kwargs?.display_only);
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
export function draw(conversation, root, hooks, cache) {
  const messages = conversation.messages();
  const results = toolResults(messages);
  const plan = latestPlan(conversation, messages);
  const usage = usagePerAnswer(messages);
  const nodes = [];
  const streamingId = conversation.running ? [...conversation.live.keys()].pop() : null;
  const waiting = new Set(conversation.approvals.map((request) => request.tool_call_id)); // calls asking first
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
    const signature = [kind, streaming, textOf(message.content).length, reasoning.length, calls.map((c) => `${c.id}:${results.has(c.id)}:${waiting.has(c.id)}`).join(","), ...cards].join("|");
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
  // Under the last message, as long as the thread waits; once answered, what was decided.
  for (const request of conversation.approvals) {
    const sent = conversation.answered.get(request.approval_id);
    if (conversation.running && !sent) continue;
    const key = `approval:${request.approval_id}:${sent ? sent.decision : "open"}`;
    if (!cache.has(key)) cache.set(key, { node: approvalCard(request, sent, hooks.approve) }); // a reason being typed stays
    extras.push(cache.get(key).node);
  }
  const suggestions = !conversation.running && !question && !conversation.approvals.length ? conversation.suggestions || [] : [];
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

/** One event of a run's stream into the conversation (`replay`: a finished run's log, re-read). */
export function applyFrame(conversation, frame, replay = false) {
  const name = frame.event.split("|")[0];
  if (frame.event === "values") {
    if (!replay) conversation.setValues(frame.data); // a replayed run's values are older than the thread's
  } else if (frame.event === "messages" && Array.isArray(frame.data)) conversation.addMessage(frame.data[0]);
  else if (name === "custom") conversation.addCustom(frame.data);
  else if (frame.event === "error") conversation.error = frame.data?.message || "The run failed.";
  else if (frame.event === "end" && ["interrupted", "timeout"].includes(frame.data?.status)) {
    conversation.stopped = true; // a marker under what was written, not an error
  }
}
