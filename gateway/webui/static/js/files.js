// The files panel: the thread's artifacts (what the agent presented) and uploads, with a preview
// (text, Markdown, images, PDF through the browser's own viewer) and a download button.
//
// Files are fetched with the page's credentials and shown from blob: URLs, so previews and
// downloads work with bearer tokens too (an <img src> or <a href> could not carry the header).

import { artifactBlob, threads } from "./api.js";
import { el } from "./dom.js";
import { icon } from "./icons.js";
import { renderMarkdown } from "./markdown.js";

const $ = (id) => document.getElementById(id);
const TEXT = /\.(txt|md|markdown|csv|tsv|json|ya?ml|toml|py|js|ts|sh|log|xml|ini|cfg|sql|css|html?)$/i;
const IMAGE = /\.(png|jpe?g|gif|webp|bmp|svg)$/i;
let objectUrls = [];
const counted = { threadId: null, uploads: null, shown: -1 }; // the open thread's uploads; what the panel lists

/** How many files the open thread has, as the panel lists them: the agent's and the uploaded ones
 * (as the gateway counted them, else as the thread's messages say until it has). */
export function fileCount(values, messages) {
  const uploads = counted.uploads ?? messages.reduce((n, m) => n + (m.additional_kwargs?.files || []).length, 0);
  return (values.artifacts || []).length + uploads;
}

/** Ask the gateway how many files were uploaded to `threadId` (the thread now open). */
export async function countUploads(threadId) {
  if (counted.threadId !== threadId) Object.assign(counted, { threadId, uploads: null });
  try {
    const { files } = await threads.uploads(threadId);
    if (counted.threadId === threadId) counted.uploads = (files || []).length;
  } catch {
    /* the messages' count stands */
  }
}

/** Whether the open panel lists fewer or more files than there are now. */
export function panelBehind(count) {
  return counted.shown >= 0 && count !== counted.shown;
}

function forgetUrls() {
  for (const url of objectUrls) URL.revokeObjectURL(url);
  objectUrls = [];
}

function urlOf(blob) {
  const url = URL.createObjectURL(blob);
  objectUrls.push(url);
  return url;
}

export function closeFiles() {
  counted.shown = -1;
  forgetUrls();
  $("artifacts").hidden = true;
  $("preview").replaceChildren();
  document.body.classList.remove("artifacts-open");
}

async function download(threadId, path) {
  const blob = await artifactBlob(threadId, path, true);
  const link = el("a", { href: urlOf(blob), download: path.split("/").pop() });
  document.body.append(link);
  link.click();
  link.remove();
}

async function preview(threadId, path, toast) {
  const box = $("preview");
  const name = path.split("/").pop();
  box.replaceChildren(el("div", { class: "muted", text: `Loading ${name}…` }));
  let blob;
  try {
    blob = await artifactBlob(threadId, path);
  } catch (error) {
    box.replaceChildren(el("div", { class: "error", text: error.message }));
    return;
  }
  const head = el(
    "div",
    { class: "preview-head" },
    el("strong", { text: name }),
    el("button", { type: "button", class: "primary", text: "Download", onclick: () => download(threadId, path).catch((e) => toast(e.message, "error")) }),
  );
  let body;
  if (/\.(md|markdown)$/i.test(name)) {
    body = el("div", { class: "md preview-doc" }, renderMarkdown(await blob.text()));
  } else if (IMAGE.test(name) && !/\.svg$/i.test(name)) {
    body = el("img", { class: "preview-img", src: urlOf(blob), alt: name });
  } else if (/\.pdf$/i.test(name) || blob.type === "application/pdf") {
    body = el("iframe", { class: "preview-pdf", src: urlOf(new Blob([blob], { type: "application/pdf" })), title: name });
  } else if (TEXT.test(name) || blob.type.startsWith("text/")) {
    body = el("pre", { class: "preview-text", text: (await blob.text()).slice(0, 200000) });
  } else {
    body = el("p", { class: "muted", text: "No preview for this kind of file; download it instead." });
  }
  box.replaceChildren(head, body);
}

/** Open the panel with the thread's artifacts (`values.artifacts`) and uploads (`count` of them). */
export async function showArtifacts(threadId, values, toast, count) {
  counted.shown = count;
  forgetUrls();
  $("artifacts").hidden = false;
  document.body.classList.add("artifacts-open");
  $("preview").replaceChildren();
  const artifacts = values.artifacts || [];
  let uploads = [];
  try {
    uploads = (await threads.uploads(threadId)).files || [];
  } catch {
    /* a new thread has none */
  }
  const item = (path, label) =>
    el(
      "li",
      { class: "artifact", "data-path": path },
      el("button", { type: "button", class: "link", text: label, onclick: () => preview(threadId, path, toast) }),
      el("button", { type: "button", class: "icon small", "aria-label": `Download ${label}`, onclick: () => download(threadId, path).catch((e) => toast(e.message, "error")) }, icon("download")),
    );
  const rows = [];
  if (artifacts.length) rows.push(el("li", { class: "group", text: "From the agent" }), ...artifacts.map((p) => item(p, p.split("/").pop())));
  if (uploads.length) rows.push(el("li", { class: "group", text: "Uploaded" }), ...uploads.map((f) => item(f.virtual_path, f.filename)));
  if (!rows.length) rows.push(el("li", { class: "muted", text: "No files in this conversation yet." }));
  $("artifact-list").replaceChildren(...rows);
  if (artifacts.length) preview(threadId, artifacts[artifacts.length - 1], toast);
}
