// The page: thread list, the conversation with its composer, and the route between chat and settings.

import { answerFoot, dropLatestTurn, footKey, humanFoot, loadRunHistory, replayStart, runActions } from "./actions.js";
import { STREAM_MODES, streamRun, threads } from "./api.js";
import { canSignOut, signIn } from "./auth.js";
import { command, slashCommand } from "./commands.js";
import { clearFiles, drawQueued, hasQueued, pendingFiles, queue, sendQueued } from "./composer.js";
import { showBrowserView } from "./browser_view.js";
import { applyFrame, Conversation, draw } from "./conversation.js";
import { el, textOf } from "./dom.js";
import { closeFiles, countUploads, fileCount, panelBehind, showArtifacts } from "./files.js";
import { goalEnded, showGoal } from "./goal.js";
import { fillIcons } from "./icons.js";
import { addNote } from "./notes.js";
import { applyTheme, chooseModel, chosenModel, loadOptions, runConfig } from "./options.js";
import { drawThreads, listed, previewOf, refreshThreads, titleOf } from "./threads.js";
import { toast } from "./toast.js";
import { route, wire } from "./wiring.js";

const $ = (id) => document.getElementById(id);

const state = {
  threadId: null, // the open thread (null: a new chat, not created yet)
  isNew: true,
  conversation: null,
  cache: new Map(), // drawn message nodes of the open thread
  runId: null,
  stopAsked: false, // Stop pressed before the run had its id
  abort: null,
  drawQueued: false,
};

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
      approve: (resume) => resumeRun(resume),
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
    // The count says what the Files panel lists: the agent's files and the uploaded ones.
    const files = conversation ? fileCount(conversation.values, conversation.messages()) : 0;
    $("open-artifacts").hidden = state.isNew || !files; // nothing to show: no button
    $("compact").hidden = state.isNew || running || (conversation?.messages() || []).filter((m) => m.type !== "note").length < 2;
    $("artifact-count").textContent = files ? String(files) : "";
    if (panelBehind(files)) openFiles(); // the open panel follows
    showBrowserView(state.isNew ? null : state.threadId, conversation ? conversation.messages() : []);
    box.scrollTop = atBottom ? box.scrollHeight : top;
  });
}

// ------------------------------------------------------------------ opening a thread

function openFiles() {
  const conversation = state.conversation;
  showArtifacts(state.threadId, conversation?.values || {}, toast, conversation ? fileCount(conversation.values, conversation.messages()) : 0);
}

function newChat() {
  state.abort?.abort();
  Object.assign(state, { threadId: crypto.randomUUID(), isNew: true, conversation: null, runId: null, abort: null });
  state.cache = new Map();
  clearFiles();
  drawQueued();
  closeFiles();
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
  closeFiles();
  countUploads(threadId).then(redraw);
  drawThreads();
  redraw();
  showGoal(threadId, false, toast);
  try {
    // The thread's record before its state: a run that ends between the two reads leaves the record
    // idle and an older state without the answer (read side by side, the page then never joined the
    // run nor saw its answer); read in this order, an idle record means the state holds the answer.
    const thread = await threads.get(threadId);
    const threadState = await threads.state(threadId);
    if (state.conversation !== conversation) return;
    conversation.setState({ ...threadState, values: threadState?.values || thread.values });
    redraw();
    loadRunHistory(conversation)
      .then(() => state.conversation === conversation && redraw())
      .catch(() => {}); // the actions and rebuilt cards come a moment later
    if (thread.status === "busy") {
      rejoin(conversation)
        .catch((error) => toast(error.message, "error"))
        .then(() => sendQueued(threadId, state.conversation?.running));
    } else {
      await replayEnded(conversation).catch(() => {}); // a lost log only loses the partial answer
      sendQueued(threadId, state.conversation?.running);
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
  conversation.setState(fresh);
  redraw();
}

/** A run is still answering in this thread (after a reload, say): follow it from its start. */
async function rejoin(conversation) {
  const [latest] = (await threads.runs(conversation.threadId, 1)) || [];
  if (!latest || !["pending", "running"].includes(latest.status)) return;
  await follow(conversation, { join: latest.run_id });
}

// ------------------------------------------------------------------ sending

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
    conversation.setState(await threads.state(conversation.threadId));
    await loadRunHistory(conversation);
  } catch {
    /* the stream's last values stay */
  }
  if (conversation.stopped || conversation.error) conversation.pin();
  redraw();
  if (next && !conversation.stopped) return follow(conversation, { join: next }); // the goal goes on
  await refreshThreads();
  // The thread's record takes the new title just after the run ends: look once more if it is not in.
  if (!listed(conversation.threadId)?.values?.title) setTimeout(refreshThreads, 1500);
}

/** The new chat is a thread now: its address and its place in the list. */
function becomeThread(threadId) {
  state.isNew = false;
  if (state.conversation?.threadId !== threadId) state.conversation = new Conversation(threadId); // notes stay
  history.replaceState(null, "", `#/t/${encodeURIComponent(threadId)}`);
  refreshThreads();
}

/** The open chat's thread, made now if it is new (for a command that needs one: /schedule, /goal). */
async function ensureThread(preview = "") {
  const threadId = state.threadId;
  if (!state.isNew) return threadId;
  await threads.create(threadId, { preview: previewOf(preview) });
  if (state.threadId === threadId && state.isNew) becomeThread(threadId);
  return threadId;
}

/** What the message box sends: a command is answered here (commands.js); the rest goes to the agent. */
async function submit(text) {
  let onward = text;
  if (slashCommand(text)) {
    try {
      onward = await command(text, page);
    } catch (error) {
      toast(`Could not do that: ${error.message}`, "error");
      return;
    }
    if (onward === null) return;
  }
  if (state.conversation?.running) queue(onward);
  else await send(onward);
}

// What commands.js may do to the page.
const page = {
  note(name, text) {
    state.conversation = state.conversation || new Conversation(state.threadId); // a new chat's notes too
    addNote(state.conversation, name, text);
    redraw();
  },
  newChat() {
    if (location.hash === "#/" || location.hash === "") newChat();
    location.hash = "#/";
  },
  isNew: () => state.isNew,
  threadId: () => state.threadId,
  title: () => titleOf(state.threadId),
  running: () => Boolean(state.conversation?.running),
  model: chosenModel,
  chooseModel,
  ensureThread,
  reload: () => reloadState(),
  resume: (value) => resumeRun(value),
};

/** How this page starts every run (`more`: its input or command). */
function runBody(more) {
  return {
    assistant_id: "lead_agent",
    ...more,
    stream_mode: STREAM_MODES,
    stream_resumable: true,
    on_disconnect: "continue",
    multitask_strategy: "enqueue",
    config: runConfig(),
  };
}

/**
 * Answer the tool call waiting for approval that `resume` names (approvals.js: the card's buttons,
 * `/approve`, `/deny`): a run resuming the thread, its answer streamed as any other. False when the
 * conversation is busy (nothing can wait then).
 */
async function resumeRun(resume) {
  const conversation = state.conversation;
  if (!conversation || conversation.running || state.isNew) return false;
  conversation.answered.set(resume.approval_id, resume);
  conversation.suggestions = [];
  await follow(conversation, { start: runBody({ command: { resume } }) });
  if (conversation.error) {
    conversation.answered.delete(resume.approval_id); // refused: the card (if it still waits) asks again
    if (/^command\.resume: nothing on thread/.test(conversation.error)) {
      conversation.error = null; // answered meanwhile (another tab, a chat) or expired: not a failure here
      toast("That request was answered already, or it expired: nothing waits for it now.");
    }
  }
  if (state.conversation === conversation) redraw();
  suggest(conversation);
  return true;
}

async function send(text, extraKwargs = {}) {
  if (state.conversation?.running) return;
  const files = pendingFiles();
  if (!text.trim() && !files.length) return;
  const threadId = state.threadId || crypto.randomUUID();
  const wasNew = state.isNew;
  state.threadId = threadId;
  let uploaded = [];
  try {
    // Until the agent names it, a new chat is called by how it began (threads.js): one whose first
    // answer fails is not "Untitled".
    if (files.length) {
      uploaded = (await threads.upload(threadId, files)).files; // creates the thread if it is new
      if (wasNew) await threads.patch(threadId, { preview: previewOf(text, files) });
    } else if (wasNew) {
      await threads.create(threadId, { preview: previewOf(text) });
    }
  } catch (error) {
    toast(`Could not send: ${error.message}`, "error");
    return;
  }
  clearFiles();
  if (uploaded.length) countUploads(threadId).then(redraw);
  let content = text;
  const kwargs = { ...extraKwargs, sent_at: new Date().toISOString() };
  if (uploaded.length) {
    kwargs.files = uploaded.map((f) => ({ filename: f.filename, size: f.size, path: f.virtual_path }));
    const listing = uploaded.map((f) => `- ${f.virtual_path}`).join("\n");
    content = `${text}\n\n[Files sent with this message, now in the sandbox:\n${listing}]`.trim();
  }
  if (wasNew) becomeThread(threadId);
  const conversation = state.conversation;
  const message = { type: "human", content, additional_kwargs: kwargs, id: `local-${Date.now()}` };
  conversation.live.set(message.id, message);
  const start = runBody({ input: { messages: [{ role: "user", content, additional_kwargs: kwargs }] } });
  conversation.suggestions = [];
  await follow(conversation, { start });
  if (hasQueued(threadId)) sendQueued(threadId, state.conversation?.running);
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
  await follow(conversation, { start: replayStart(prepared, runBody({})) });
  suggest(conversation);
}

/** Follow-up questions under a finished answer (none after an error, a stop, a question or an approval asked for). */
async function suggest(conversation) {
  if (conversation.running || conversation.error || conversation.stopped || conversation.openQuestion() || conversation.approvals.length) return;
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

async function main() {
  applyTheme(localStorage.getItem("antler.theme"));
  try {
    await signIn($("signin"));
  } catch (error) {
    document.body.append(el("p", { class: "fatal", text: `Antler's gateway is not answering: ${error.message}` }));
    return;
  }
  $("sign-out").hidden = !canSignOut();
  fillIcons();
  const app = {
    threadId: () => state.threadId,
    isNew: () => state.isNew,
    openTitle: () => state.conversation?.title || "",
    submit,
    send,
    stop,
    newChat: page.newChat, // the New chat button: by the address
    startChat: newChat,
    openThread,
    redraw,
    openFiles,
    reloadState,
  };
  wire(app);
  await loadOptions();
  await refreshThreads();
  await route(app);
  $("app").hidden = false; // only now: nothing typed or attached before is lost to the first route
  setInterval(() => document.visibilityState === "visible" && refreshThreads(), 15000);
}

main();
