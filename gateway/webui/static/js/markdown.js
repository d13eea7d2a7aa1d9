// Model output as safe HTML: marked renders the Markdown, DOMPurify removes anything that could run.

import DOMPurify from "../vendor/dompurify/purify.es.mjs";
import { marked } from "../vendor/marked/marked.esm.js";

marked.setOptions({ gfm: true, breaks: false });

const SAFE_URL = /^(https?:|mailto:|#|\/(?!\/))/i;

// Links open in a new tab without handing it this page; anything but http(s), mailto and local
// paths (javascript:, data:, vbscript: ...) loses its target altogether.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    const href = node.getAttribute("href") || "";
    if (!SAFE_URL.test(href.trim())) node.removeAttribute("href");
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
  if (node.tagName === "IMG") {
    const src = node.getAttribute("src") || "";
    if (!/^(https?:|data:image\/(png|gif|jpeg|webp);)/i.test(src.trim())) node.removeAttribute("src");
    node.setAttribute("loading", "lazy");
  }
});

const PURIFY = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed"],
  FORBID_ATTR: ["style"],
  RETURN_DOM_FRAGMENT: true,
};

/** A DocumentFragment of the Markdown `text`, sanitized (no script, handlers or unsafe URLs). */
export function renderMarkdown(text) {
  const html = marked.parse(String(text ?? ""), { async: false });
  return DOMPurify.sanitize(html, PURIFY);
}
