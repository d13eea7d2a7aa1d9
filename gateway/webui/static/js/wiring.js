// What the page's controls and its address do: each wired to the page's action (`app.js` passes
// them in).

import { signOut } from "./auth.js";
import { pendingFiles, wireComposer } from "./composer.js";
import { wireBrowserView } from "./browser_view.js";
import { wireCompact } from "./compact.js";
import { closeFiles } from "./files.js";
import { wireGoal } from "./goal.js";
import { cycleTheme } from "./options.js";
import { showSettings } from "./settings.js";
import { wireThreads } from "./threads.js";
import { toast } from "./toast.js";

const $ = (id) => document.getElementById(id);

export function wire(app) {
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("input").value;
    if (!text.trim() && !pendingFiles().length) return;
    $("input").value = "";
    app.submit(text);
  });
  $("input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", app.stop);
  wireComposer({ current: app.threadId, send: app.send });
  $("new-chat").addEventListener("click", app.newChat);
  wireThreads({
    current: app.threadId,
    openTitle: app.openTitle,
    onChange: (threadId, deleted) => {
      if (deleted && threadId === app.threadId()) location.hash = "#/";
      else app.redraw();
    },
    toast,
  });
  wireGoal((objective) => app.submit(`/goal ${objective}`));
  wireBrowserView();
  $("open-settings").addEventListener("click", () => (location.hash = "#/settings/memory"));
  $("theme").addEventListener("click", () => cycleTheme(toast));
  $("sign-out").addEventListener("click", signOut);
  $("open-sidebar").addEventListener("click", () => document.body.classList.add("sidebar-open"));
  $("close-sidebar").addEventListener("click", () => document.body.classList.remove("sidebar-open"));
  $("open-artifacts").addEventListener("click", app.openFiles);
  $("close-artifacts").addEventListener("click", closeFiles);
  wireCompact($("compact"), { threadId: app.threadId, reload: app.reloadState, toast });
  window.addEventListener("hashchange", () => route(app));
}

/** Chat or settings, and which thread: what the address (`#/t/<id>`, `#/settings/<tab>`) says. */
export async function route(app) {
  const hash = decodeURIComponent(location.hash.replace(/^#\/?/, ""));
  document.body.classList.remove("sidebar-open");
  if (hash.startsWith("settings")) {
    $("chat-view").hidden = true;
    $("settings-view").hidden = false;
    $("open-artifacts").hidden = true;
    $("chat-title").textContent = "Settings";
    closeFiles();
    await showSettings(hash.split("/")[1] || "memory", $("settings-body"), toast);
    return;
  }
  $("chat-view").hidden = false;
  $("settings-view").hidden = true;
  if (hash.startsWith("t/")) await app.openThread(hash.slice(2));
  else if (!app.isNew() || !app.threadId()) app.startChat();
  else app.redraw();
}
