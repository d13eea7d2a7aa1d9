// Around the message box: files chosen for the next message (the picker or a drop on the
// conversation), and messages queued while an answer streams.
//
// A message typed while an answer streams is queued, not dropped: it shows above the composer
// (where it can be taken back to edit) and is sent, in order, when the answer ends — as Claude's
// and DeerFlow's UIs do. The queue is the page's; files attached stay with the composer.

import { el } from "./dom.js";
import { icon } from "./icons.js";

const $ = (id) => document.getElementById(id);
const pending = []; // files chosen for the next message
const queued = []; // {text, threadId}
const hooks = { current: () => null, send: () => {} };

// ------------------------------------------------------------------ files for the next message

export function pendingFiles() {
  return [...pending];
}

/** The files go with a message (or the chat changed): the composer has none any more. */
export function clearFiles() {
  pending.length = 0;
  drawAttachments();
}

function addFiles(list) {
  for (const file of list) pending.push(file);
  drawAttachments();
}

function drawAttachments() {
  $("attachments").replaceChildren(
    ...pending.map((file, i) =>
      el(
        "span",
        { class: "chip" },
        file.name,
        el("button", { type: "button", class: "icon small", "aria-label": `Remove ${file.name}`, onclick: () => { pending.splice(i, 1); drawAttachments(); } }, icon("remove")),
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

// ------------------------------------------------------------------ queued messages

export function queue(text) {
  queued.push({ text, threadId: hooks.current() });
  drawQueued();
}

export function hasQueued(threadId) {
  return queued.some((q) => q.threadId === threadId);
}

export function drawQueued() {
  const mine = queued.filter((q) => q.threadId === hooks.current());
  $("queued").replaceChildren(
    ...mine.map((item) =>
      el(
        "li",
        { class: "queued-item" },
        el("span", { class: "queued-label", text: "Queued" }),
        el("span", { class: "queued-text", text: item.text }),
        el(
          "button",
          {
            type: "button",
            class: "icon small",
            "aria-label": "Edit the queued message",
            onclick: () => {
              queued.splice(queued.indexOf(item), 1);
              const input = $("input");
              input.value = input.value ? `${item.text}\n${input.value}` : item.text;
              input.focus();
              drawQueued();
            },
          },
          icon("edit"),
        ),
      ),
    ),
  );
}

/** The answer of `threadId` ended (`busy`: another started already): send its next queued message. */
export function sendQueued(threadId, busy) {
  const next = queued.findIndex((q) => q.threadId === threadId);
  if (next < 0 || threadId !== hooks.current() || busy) return;
  const [item] = queued.splice(next, 1);
  drawQueued();
  hooks.send(item.text);
}

/** `current()`: the open thread; `send(text)`: how a queued message goes out. */
export function wireComposer(given) {
  Object.assign(hooks, given);
  $("attach").addEventListener("click", () => $("file-input").click());
  $("file-input").addEventListener("change", (event) => {
    addFiles(event.target.files);
    event.target.value = "";
  });
  wireDropZone();
}
