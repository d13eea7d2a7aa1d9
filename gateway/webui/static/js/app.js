// The page: thread list, the conversation with its composer, and the route between chat and settings.

import { answerFoot, dropLatestTurn, footKey, humanFoot, loadRunHistory, replayStart, runActions } from "./actions.js";
import { STREAM_MODES, settings, streamRun, threads } from "./api.js";
import { canSignOut, signIn, signOut } from "./auth.js";
import { Conversation, draw, el, textOf } from "./conversation.js";
import { confirmInPage } from "./confirm.js";
import { wireCompact } from "./compact.js";
import { closeArtifacts, showArtifacts } from "./files.js";
import { goalCommand, goalEnded, showGoal } from "./goal.js";
import { showSettings } from "./settings.js";

const $ = (id) => document.getElementById(id);
const OPTIONS = { thinking: "opt-thinking", plan: "opt-plan", subagents: "opt-subagents" };

const state = {
  threadId: null, // the open thread (null: a new chat, not created yet)
  isNew: true,
  conversation: null,
  cache: new Map(), // drawn message nodes of the open thread
  threadList: [],
  pending: [], // files chosen for the next message
  queued: [], // messages typed while an answer streamed: sent in order when it ends
  runId: null,
  stopAsked: false, // Stop pressed before the run had its id
  abort: null,
  drawQueued: false,
};

export function toast(text, kind = "info") {
  const box = $("toast");
  box.textContent = text;
  box.className = `toast toast-${kind}`;
  box.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (box.hidden = true), 5000);
}

function redraw() {
  if (state.drawQueued) return;
  state.drawQueued = true;
  requestAnimationFrame(() => {
    state.drawQueued = false;
    const box = $("messages");
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
    const top = box.scrollTop; // redrawing replaces the children, which can reset the scroll
    const conversation = state.conversation;
    const hooks = {
      answer,
      suggestion: (text) => send(text),
      footKey: (message) => footKey(conversation, message),
      answerFoot: (message) => answerFoot(conversation, message, act),
      humanFoot: (message) => humanFoot(conversation, message, act),
    };
    if (conversation) draw(conversation, box, hooks, state.cache);
    else box.replaceChildren();
    const empty = !conversation || (!conversation.messages().length && !conversation.running);
    $("empty").hidden = !empty;
    $("chat-title").textContent = titleOf(state.threadId) || "New chat";
    const running = Boolean(conversation?.running);
    $("stop").hidden = !running;
    $("send").textContent = running ? "Queue" : "Send";
    const files = (conversation?.values.artifacts || []).length;
    const uploads = (conversation?.messages() || []).reduce((n, m) => n + (m.additional_kwargs?.files || []).length, 0);
    $("open-artifacts").hidden = state.isNew || !(files + uploads); // nothing to show: no button
    $("compact").hidden = state.isNew || running || (conversation?.messages() || []).length < 2;
    $("artifact-count").textContent = files ? String(files) : "";
    box.scrollTop = atBottom ? box.scrollHeight : top;
  });
}

// ------------------------------------------------------------------ thread list

function titleOf(threadId) {
  // A rename (metadata) wins over the agent's title; the open thread's state may know it first.
  const thread = state.threadList.find((t) => t.thread_id === threadId);
  const open = threadId === state.threadId ? state.conversation?.title : "";
  return thread?.metadata?.title || thread?.values?.title || open || "";
}

async function refreshThreads() {
  try {
    state.threadList = (await threads.search()) || [];
  } catch (error) {
    toast(`Could not list conversations: ${error.message}`, "error");
    return;
  }
  drawThreads();
}

function drawThreads() {
  const filter = $("thread-search").value.trim().toLowerCase();
  const items = state.threadList
    .map((t) => ({ id: t.thread_id, title: titleOf(t.thread_id) || "Untitled", busy: t.status === "busy" }))
    .filter((t) => !filter || t.title.toLowerCase().includes(filter));
  $("thread-list").replaceChildren(
    ...items.map((t) =>
      el(
        "li",
        { class: `thread${t.id === state.threadId ? " active" : ""}`, "data-thread": t.id },
        el("a", { href: `#/t/${encodeURIComponent(t.id)}`, class: "thread-title", text: t.title, title: t.title }),
        t.busy ? el("span", { class: "dot", "aria-label": "answering" }) : null,
        el("button", { type: "button", class: "icon small", "aria-label": `Rename ${t.title}`, text: "✎", onclick: () => rename(t) }),
        el("button", { type: "button", class: "icon small", "aria-label": `Delete ${t.title}`, text: "✕", onclick: () => remove(t) }),
      ),
    ),
  );
}

function rename(thread) {
  const item = document.querySelector(`[data-thread="${CSS.escape(thread.id)}"]`);
  const input = el("input", { class: "rename", value: thread.title, "aria-label": "New title" });
  const save = async () => {
    const title = input.value.trim();
    if (!title || title === thread.title) return drawThreads();
    try {
      await threads.patch(thread.id, { title });
      // The agent's own state too, so later runs keep the new title.
      await threads.updateState(thread.id, { title }).catch(() => {});
    } catch (error) {
      toast(`Could not rename: ${error.message}`, "error");
    }
    await refreshThreads();
    redraw();
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") save();
    if (event.key === "Escape") drawThreads();
  });
  input.addEventListener("blur", save, { once: true });
  item.replaceChildren(input);
  input.focus();
  input.select();
}

async function remove(thread) {
  const sure = await confirmInPage(`Delete "${thread.title}"?`, "Delete", "Its messages and files are removed.");
  if (!sure) return;
  try {
    await threads.remove(thread.id);
  } catch (error) {
    toast(`Could not delete: ${error.message}`, "error");
  }
  if (thread.id === state.threadId) location.hash = "#/";
  await refreshThreads();
}

// ------------------------------------------------------------------ opening a thread

function newChat() {
  state.abort?.abort();
  Object.assign(state, { threadId: crypto.randomUUID(), isNew: true, conversation: null, runId: null, abort: null });
  state.cache = new Map();
  state.pending = [];
  drawAttachments();
  drawQueued();
  closeArtifacts();
  drawThreads();
  redraw();
  showGoal(state.threadId, true, toast);
  $("input").focus();
}

async function openThread(threadId) {
  if (threadId === state.threadId && state.conversation) return;
  state.abort?.abort();
  Object.assign(state, { threadId, isNew: false, runId: null, abort: null });
  state.cache = new Map();
  const conversation = new Conversation(threadId);
  state.conversation = conversation;
  drawQueued();
  closeArtifacts();
  drawThreads();
  redraw();
  showGoal(threadId, false, toast);
  try {
    const [thread, threadState] = await Promise.all([threads.get(threadId), threads.state(threadId)]);
    if (state.conversation !== conversation) return;
    conversation.setValues(threadState?.values || thread.values);
    redraw();
    loadRunHistory(conversation)
      .then(() => state.conversation === conversation && redraw())
      .catch(() => {}); // the actions and rebuilt cards come a moment later
    if (thread.status === "busy") {
      rejoin(conversation)
        .catch((error) => toast(error.message, "error"))
        .then(() => sendQueued(threadId));
    } else {
      await replayEnded(conversation).catch(() => {}); // a lost log only loses the partial answer
      sendQueued(threadId);
    }
  } catch (error) {
    if (error.status === 404) {
      toast("That conversation does not exist (or is not yours).", "error");
      location.hash = "#/";
    } else toast(`Could not open the conversation: ${error.message}`, "error");
  }
}

/** The open thread's messages again from its state (after a compaction replaced the older ones). */
async function reloadState() {
  const conversation = state.conversation;
  const fresh = await threads.state(conversation.threadId);
  if (state.conversation !== conversation) return;
  state.cache = new Map();
  conversation.setValues(fresh?.values || {});
  redraw();
}

/** A run is still answering in this thread (after a reload, say): follow it from its start. */
async function rejoin(conversation) {
  const [latest] = (await threads.runs(conversation.threadId, 1)) || [];
  if (!latest || !["pending", "running"].includes(latest.status)) return;
  await follow(conversation, { join: latest.run_id });
}

// ------------------------------------------------------------------ sending

function runConfig() {
  const opt = (name) => $(OPTIONS[name]).checked;
  const configurable = { thinking_enabled: opt("thinking"), is_plan_mode: opt("plan"), subagent_enabled: opt("subagents") };
  if ($("model").value) configurable.model_name = $("model").value;
  return { configurable };
}

/** One event of a run's stream into the conversation (`replay`: a finished run's log, re-read). */
function applyFrame(conversation, frame, replay = false) {
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

/**
 * The thread's last run ended early (stopped, failed, timed out): what it wrote before is not in the
 * thread's state, but its event log keeps it. Re-read that log so the partial answer, its subagent
 * cards and its error (or the stopped marker) show again after a reload.
 */
async function replayEnded(conversation) {
  const [latest] = (await threads.runs(conversation.threadId, 1)) || [];
  if (!latest || !["interrupted", "error", "timeout"].includes(latest.status)) return;
  const abort = new AbortController();
  state.abort = abort;
  try {
    await streamRun(conversation.threadId, {
      join: latest.run_id,
      signal: abort.signal,
      onEvent: (frame) => applyFrame(conversation, frame, true),
    });
  } finally {
    if (state.abort === abort) state.abort = null;
  }
  conversation.pin();
  if (state.conversation === conversation) redraw();
}

async function follow(conversation, how) {
  const abort = new AbortController();
  state.abort = abort;
  conversation.running = true;
  conversation.error = null;
  conversation.stopped = false;
  redraw();
  let next = null; // the run a goal's runner started after this one (goal.js)
  try {
    await streamRun(conversation.threadId, {
      ...how,
      signal: abort.signal,
      onRun: (runId) => {
        state.runId = runId;
        if (state.stopAsked) stop(); // Stop was pressed before the run had its id
      },
      onEvent: (frame) => {
        applyFrame(conversation, frame);
        if (frame.event === "end") next = goalEnded(conversation.threadId, frame.data?.goal);
        if (state.conversation === conversation) redraw();
      },
    });
  } catch (error) {
    if (!abort.signal.aborted) conversation.error = error.message;
  } finally {
    conversation.running = false;
    if (state.abort === abort) state.abort = null;
    state.runId = null;
    state.stopAsked = false;
  }
  if (abort.signal.aborted || state.conversation !== conversation) return;
  try {
    const threadState = await threads.state(conversation.threadId);
    conversation.setValues(threadState?.values || {});
    await loadRunHistory(conversation);
  } catch {
    /* the stream's last values stay */
  }
  if (conversation.stopped || conversation.error) conversation.pin();
  redraw();
  if (next && !conversation.stopped) return follow(conversation, { join: next }); // the goal goes on
  await refreshThreads();
  // The thread's record takes the new title just after the run ends: look once more if it is not in.
  if (!state.threadList.find((t) => t.thread_id === conversation.threadId)?.values?.title) {
    setTimeout(refreshThreads, 1500);
  }
}

async function send(text, extraKwargs = {}) {
  if (state.conversation?.running) return;
  if (text.trim().startsWith("/goal")) {
    text = await goalCommand(state.threadId || (state.threadId = crypto.randomUUID()), text);
    if (text === null) return;
  }
  const files = state.pending;
  if (!text.trim() && !files.length) return;
  const threadId = state.threadId || crypto.randomUUID();
  const wasNew = state.isNew;
  state.threadId = threadId;
  let uploaded = [];
  try {
    if (files.length) {
      uploaded = (await threads.upload(threadId, files)).files; // creates the thread if it is new
    } else if (wasNew) {
      await threads.create(threadId);
    }
  } catch (error) {
    toast(`Could not send: ${error.message}`, "error");
    return;
  }
  state.pending = [];
  drawAttachments();
  let content = text;
  const kwargs = { ...extraKwargs, sent_at: new Date().toISOString() };
  if (uploaded.length) {
    kwargs.files = uploaded.map((f) => ({ filename: f.filename, size: f.size, path: f.virtual_path }));
    const listing = uploaded.map((f) => `- ${f.virtual_path}`).join("\n");
    content = `${text}\n\n[Files sent with this message, now in the sandbox:\n${listing}]`.trim();
  }
  if (wasNew) {
    state.isNew = false;
    state.conversation = new Conversation(threadId);
    history.replaceState(null, "", `#/t/${encodeURIComponent(threadId)}`);
    refreshThreads();
  }
  const conversation = state.conversation;
  const message = { type: "human", content, additional_kwargs: kwargs, id: `local-${Date.now()}` };
  conversation.live.set(message.id, message);
  const start = {
    assistant_id: "lead_agent",
    input: { messages: [{ role: "user", content, additional_kwargs: kwargs }] },
    stream_mode: STREAM_MODES,
    stream_resumable: true,
    on_disconnect: "continue",
    multitask_strategy: "enqueue",
    config: runConfig(),
  };
  conversation.suggestions = [];
  await follow(conversation, { start });
  if (state.queued.some((q) => q.threadId === threadId)) sendQueued(threadId);
  else suggest(conversation);
}

// ------------------------------------------------------------------ actions under messages (actions.js)

const act = {
  regenerate: (message) => replay((id) => runActions.regenerate(id, message.id), "answer"),
  edit: (message, text) => replay((id) => runActions.edit(id, message.id, text), "human", text),
  redraw: () => {
    state.cache = new Map();
    redraw();
  },
  async branch(message) {
    try {
      const made = await runActions.branch(state.conversation.threadId, message.id);
      await refreshThreads();
      location.hash = `#/t/${encodeURIComponent(made.thread_id)}`;
      toast("Branched into a new conversation.");
    } catch (error) {
      toast(`Could not branch: ${error.message}`, "error");
    }
  },
  async rate(runId, rating) {
    const conversation = state.conversation;
    try {
      if (rating) await runActions.rate(conversation.threadId, runId, rating);
      else await runActions.unrate(conversation.threadId, runId);
      conversation.ratings.set(runId, rating);
      redraw();
    } catch (error) {
      toast(`Could not save the rating: ${error.message}`, "error");
    }
  },
};

/** Regenerate the latest answer or send the latest message edited: prepared by the gateway, streamed here. */
async function replay(prepare, from, text) {
  const conversation = state.conversation;
  if (!conversation || conversation.running) return;
  let prepared;
  try {
    prepared = await prepare(conversation.threadId);
  } catch (error) {
    toast(`Could not ${from === "human" ? "send the edit" : "regenerate"}: ${error.message}`, "error");
    act.redraw();
    return;
  }
  dropLatestTurn(conversation, from);
  if (text) conversation.live.set(`local-${Date.now()}`, { type: "human", content: text, additional_kwargs: {}, id: `local-${Date.now()}` });
  state.cache = new Map();
  conversation.suggestions = [];
  const base = { assistant_id: "lead_agent", stream_mode: STREAM_MODES, stream_resumable: true, on_disconnect: "continue", multitask_strategy: "enqueue", config: runConfig() };
  await follow(conversation, { start: replayStart(prepared, base) });
  suggest(conversation);
}

/** Follow-up questions under a finished answer (none after an error, a stop or a question). */
async function suggest(conversation) {
  if (conversation.running || conversation.error || conversation.stopped || conversation.openQuestion()) return;
  const turns = conversation
    .messages()
    .filter((m) => ["human", "ai"].includes(m.type) && textOf(m.content) && !m.additional_kwargs?.hide_from_ui)
    .slice(-6)
    .map((m) => ({ role: m.type === "human" ? "user" : "assistant", content: textOf(m.content) }));
  if (!turns.length) return;
  try {
    const { suggestions } = await threads.suggestions(conversation.threadId, turns);
    if (conversation.running || state.conversation !== conversation) return;
    conversation.suggestions = (suggestions || []).slice(0, 3);
    redraw();
  } catch {
    /* suggestions are a nicety: none is fine */
  }
}

// ------------------------------------------------------------------ queued messages

/**
 * A message typed while an answer streams is queued, not dropped: it shows above the composer
 * (where it can be taken back to edit) and is sent, in order, when the answer ends — as Claude's
 * and DeerFlow's UIs do. The queue is the page's; files attached stay with the composer.
 */
function queue(text) {
  state.queued.push({ text, threadId: state.threadId });
  drawQueued();
}

function drawQueued() {
  const mine = state.queued.filter((q) => q.threadId === state.threadId);
  $("queued").replaceChildren(
    ...mine.map((item) =>
      el(
        "li",
        { class: "queued-item" },
        el("span", { class: "queued-label", text: "Queued" }),
        el("span", { class: "queued-text", text: item.text }),
        el("button", {
          type: "button",
          class: "icon small",
          "aria-label": "Edit the queued message",
          text: "✎",
          onclick: () => {
            state.queued.splice(state.queued.indexOf(item), 1);
            const input = $("input");
            input.value = input.value ? `${item.text}\n${input.value}` : item.text;
            input.focus();
            drawQueued();
          },
        }),
      ),
    ),
  );
}

/** The answer of `threadId` ended: send its next queued message, if any. */
function sendQueued(threadId) {
  const next = state.queued.findIndex((q) => q.threadId === threadId);
  if (next < 0 || threadId !== state.threadId || state.conversation?.running) return;
  const [item] = state.queued.splice(next, 1);
  drawQueued();
  send(item.text);
}

function answer(request, response) {
  const full = { version: 1, kind: "human_input_response", source: request.source, request_id: request.request_id, ...response };
  const text = `For your clarification "${request.question}", my answer is: ${response.value}`;
  send(text, { hide_from_ui: true, human_input_response: full });
}

async function stop() {
  const conversation = state.conversation;
  if (!conversation?.running) return;
  if (!state.runId) {
    state.stopAsked = true; // the run is being created: stop it as soon as it has an id
    return;
  }
  state.stopAsked = false;
  try {
    await threads.cancel(conversation.threadId, state.runId);
  } catch (error) {
    toast(`Could not stop: ${error.message}`, "error");
  }
}

// ------------------------------------------------------------------ attachments

function addFiles(list) {
  for (const file of list) state.pending.push(file);
  drawAttachments();
}

function drawAttachments() {
  $("attachments").replaceChildren(
    ...state.pending.map((file, i) =>
      el(
        "span",
        { class: "chip" },
        file.name,
        el("button", { type: "button", class: "icon small", "aria-label": `Remove ${file.name}`, text: "✕", onclick: () => { state.pending.splice(i, 1); drawAttachments(); } }),
      ),
    ),
  );
}

function wireDropZone() {
  const zone = $("chat-view");
  let depth = 0;
  const hasFiles = (event) => [...(event.dataTransfer?.types || [])].includes("Files");
  zone.addEventListener("dragenter", (event) => {
    if (!hasFiles(event)) return;
    event.preventDefault();
    depth++;
    $("drop").hidden = false;
  });
  zone.addEventListener("dragover", (event) => {
    if (hasFiles(event)) event.preventDefault();
  });
  zone.addEventListener("dragleave", () => {
    if (--depth <= 0) {
      depth = 0;
      $("drop").hidden = true;
    }
  });
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    depth = 0;
    $("drop").hidden = true;
    if (event.dataTransfer?.files?.length) addFiles(event.dataTransfer.files);
  });
}

// ------------------------------------------------------------------ options, theme, routing

async function loadModels() {
  const select = $("model");
  try {
    const { models } = await settings.models();
    const chosen = localStorage.getItem("antler.model");
    select.replaceChildren(
      ...models.map((m) => el("option", { value: m.name, text: m.display_name || m.name, selected: m.name === chosen })),
    );
    select.hidden = models.length === 0;
  } catch {
    select.hidden = true;
  }
  select.addEventListener("change", () => localStorage.setItem("antler.model", select.value));
  for (const [name, id] of Object.entries(OPTIONS)) {
    const box = $(id);
    box.checked = localStorage.getItem(`antler.${name}`) === "1";
    box.addEventListener("change", () => localStorage.setItem(`antler.${name}`, box.checked ? "1" : "0"));
  }
}

function applyTheme(theme) {
  if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}

function cycleTheme() {
  const order = ["auto", "light", "dark"];
  const next = order[(order.indexOf(localStorage.getItem("antler.theme") || "auto") + 1) % 3];
  localStorage.setItem("antler.theme", next);
  applyTheme(next);
  toast(`Theme: ${next}`);
}

async function route() {
  const hash = decodeURIComponent(location.hash.replace(/^#\/?/, ""));
  document.body.classList.remove("sidebar-open");
  if (hash.startsWith("settings")) {
    $("chat-view").hidden = true;
    $("settings-view").hidden = false;
    $("open-artifacts").hidden = true;
    $("chat-title").textContent = "Settings";
    closeArtifacts();
    await showSettings(hash.split("/")[1] || "memory", $("settings-body"), toast);
    return;
  }
  $("chat-view").hidden = false;
  $("settings-view").hidden = true;
  if (hash.startsWith("t/")) await openThread(hash.slice(2));
  else if (!state.isNew || !state.threadId) newChat();
  else redraw();
}

function wire() {
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("input").value;
    if (!text.trim() && !state.pending.length) return;
    $("input").value = "";
    if (state.conversation?.running) queue(text);
    else send(text);
  });
  $("input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", stop);
  $("attach").addEventListener("click", () => $("file-input").click());
  $("file-input").addEventListener("change", (event) => {
    addFiles(event.target.files);
    event.target.value = "";
  });
  $("new-chat").addEventListener("click", () => {
    if (location.hash === "#/" || location.hash === "") newChat();
    location.hash = "#/";
  });
  $("thread-search").addEventListener("input", drawThreads);
  $("open-settings").addEventListener("click", () => (location.hash = "#/settings/memory"));
  $("theme").addEventListener("click", cycleTheme);
  $("sign-out").addEventListener("click", signOut);
  $("open-sidebar").addEventListener("click", () => document.body.classList.add("sidebar-open"));
  $("close-sidebar").addEventListener("click", () => document.body.classList.remove("sidebar-open"));
  $("open-artifacts").addEventListener("click", () => showArtifacts(state.threadId, state.conversation?.values || {}, toast));
  $("close-artifacts").addEventListener("click", closeArtifacts);
  wireCompact($("compact"), { threadId: () => state.threadId, reload: reloadState, toast });
  window.addEventListener("hashchange", route);
  wireDropZone();
}

async function main() {
  applyTheme(localStorage.getItem("antler.theme"));
  try {
    await signIn($("signin"));
  } catch (error) {
    document.body.append(el("p", { class: "fatal", text: `Antler's gateway is not answering: ${error.message}` }));
    return;
  }
  $("sign-out").hidden = !canSignOut();
  wire();
  await loadModels();
  await refreshThreads();
  await route();
  $("app").hidden = false; // only now: nothing typed or attached before is lost to the first route
  setInterval(() => document.visibilityState === "visible" && refreshThreads(), 15000);
}

main();
