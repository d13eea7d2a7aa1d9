// The thread list: every conversation with a title and the day it last changed, search, rename and
// delete.
//
// A title is the user's rename (metadata.title), else the agent's (values.title, written after a
// successful run), else what the chat began with (metadata.preview, which this page writes when it
// creates a thread): a chat whose first answer failed is named by its question, not "Untitled".

import { threads } from "./api.js";
import { confirmInPage } from "./confirm.js";
import { el } from "./dom.js";
import { icon } from "./icons.js";

const $ = (id) => document.getElementById(id);
const PREVIEW_CHARS = 60;

const list = {
  threads: [],
  current: () => null, // the open thread's id
  openTitle: () => "", // the open conversation's title, as its state knows it (before the list does)
  onChange: () => {}, // a thread was renamed or deleted: `(threadId, deleted)`
  toast: () => {},
};

/** Wire the list to the page: where it reads the open thread and where it says what changed. */
export function wireThreads(hooks) {
  Object.assign(list, hooks);
  $("thread-search").addEventListener("input", drawThreads);
}

/** What a new chat is called until the agent names it: its first words (or its files). */
export function previewOf(text, files = []) {
  const words = text.replace(/\s+/g, " ").trim();
  const shown = words || (files.length ? `Files: ${files.map((f) => f.name).join(", ")}` : "");
  return shown.length > PREVIEW_CHARS ? `${shown.slice(0, PREVIEW_CHARS - 1).trimEnd()}…` : shown;
}

export function titleOf(threadId) {
  const thread = list.threads.find((t) => t.thread_id === threadId);
  const open = threadId === list.current() ? list.openTitle() : "";
  return thread?.metadata?.title || thread?.values?.title || open || thread?.metadata?.preview || "";
}

/** The listed thread, if the list has it. */
export function listed(threadId) {
  return list.threads.find((t) => t.thread_id === threadId);
}

/** When, in as few words as the list has room for: 14:05 today, Yesterday, Mon, 3 Nov, 3 Nov 2025. */
export function shortDate(iso, now = new Date()) {
  const when = new Date(iso);
  if (!iso || Number.isNaN(when.getTime())) return "";
  const day = (d) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
  const days = Math.round((day(now) - day(when)) / 86400000);
  if (days <= 0) return when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  if (days === 1) return "Yesterday";
  if (days < 7) return when.toLocaleDateString([], { weekday: "short" });
  const year = when.getFullYear() === now.getFullYear() ? undefined : "numeric";
  return when.toLocaleDateString([], { day: "numeric", month: "short", year });
}

export async function refreshThreads() {
  try {
    list.threads = (await threads.search()) || [];
  } catch (error) {
    list.toast(`Could not list conversations: ${error.message}`, "error");
    return;
  }
  drawThreads();
}

export function drawThreads() {
  const filter = $("thread-search").value.trim().toLowerCase();
  const items = list.threads
    .map((t) => ({
      id: t.thread_id,
      title: titleOf(t.thread_id) || `Chat of ${new Date(t.created_at || Date.now()).toLocaleDateString([], { day: "numeric", month: "short" })}`,
      busy: t.status === "busy",
      when: t.updated_at || t.created_at,
    }))
    .filter((t) => !filter || t.title.toLowerCase().includes(filter));
  $("thread-list").replaceChildren(
    ...items.map((t) =>
      el(
        "li",
        { class: `thread${t.id === list.current() ? " active" : ""}`, "data-thread": t.id },
        el(
          "a",
          { href: `#/t/${encodeURIComponent(t.id)}`, class: "thread-link", title: t.title },
          el("span", { class: "thread-title", text: t.title }),
          el("time", { class: "thread-date", datetime: t.when, title: new Date(t.when).toLocaleString(), text: shortDate(t.when) }),
        ),
        t.busy ? el("span", { class: "dot", "aria-label": "answering" }) : null,
        el("button", { type: "button", class: "icon small", "aria-label": `Rename ${t.title}`, onclick: () => rename(t) }, icon("edit")),
        el("button", { type: "button", class: "icon small", "aria-label": `Delete ${t.title}`, onclick: () => remove(t) }, icon("remove")),
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
      list.toast(`Could not rename: ${error.message}`, "error");
    }
    await refreshThreads();
    list.onChange(thread.id, false);
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
    list.toast(`Could not delete: ${error.message}`, "error");
  }
  list.onChange(thread.id, true);
  await refreshThreads();
}
