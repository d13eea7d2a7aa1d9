// A chat command's answer in the conversation (/help, /status, /schedules ...): shown where it was
// asked, as a chat shows the bot's reply to a command. It belongs to the page, not to the thread:
// the agent never sees it, and a reload does not bring it back.

let made = 0;

/** Put the answer `text` to `command` in the conversation, after what it shows now. */
export function addNote(conversation, command, text) {
  const base = conversation.base;
  const anchor = base.length ? base[base.length - 1].id : null;
  conversation.pinned.push({ anchor, message: { type: "note", id: `note-${++made}`, command, content: text } });
}

/** A note as the conversation draws it (`el` from dom.js). */
export function noteBlock(message, el) {
  return el(
    "div",
    { class: "msg msg-note", role: "status" },
    el("div", { class: "note-command", text: message.command }),
    el("div", { class: "plain", text: message.content }),
  );
}
