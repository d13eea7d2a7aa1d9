// Syntax colours for fenced code blocks, added after the Markdown has been rendered and sanitized.
//
// highlight.js (vendored, common languages) turns the code's plain text into spans with `hljs-*`
// classes; the colours are plain CSS in app.css, so nothing inline is needed and the page's CSP
// stays as strict as it is. Its output escapes the code, and is sanitized again anyway (spans with
// classes only) before it replaces the block's text. A language it does not know stays plain text.

import DOMPurify from "../vendor/dompurify/purify.es.mjs";
import hljs from "../vendor/highlight/highlight.min.js";

hljs.configure({ ignoreUnescapedHTML: true, throwUnescapedHTML: false });

const ONLY_SPANS = { ALLOWED_TAGS: ["span"], ALLOWED_ATTR: ["class"], RETURN_DOM_FRAGMENT: true };

// A streamed answer is redrawn with every chunk; its finished blocks are coloured once, not each time.
const cache = new Map();
const CACHE_SIZE = 200;

function coloured(language, text) {
  const key = `${language}\n${text}`;
  let html = cache.get(key);
  if (html === undefined) {
    html = hljs.highlight(text, { language, ignoreIllegals: true }).value;
    if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value);
    cache.set(key, html);
  }
  return DOMPurify.sanitize(html, ONLY_SPANS);
}

/** True when the highlighter knows `language` (a name or alias such as "py"). */
export function knownLanguage(language) {
  return Boolean(language && hljs.getLanguage(language));
}

/**
 * Colour the `<code>` element `code` as `language`, in place; leave it untouched (plain text)
 * when the language is unknown or the highlighter fails.
 */
export function highlightCode(code, language) {
  if (!knownLanguage(language)) return;
  try {
    code.replaceChildren(coloured(language, code.textContent));
    code.classList.add("hljs");
  } catch (error) {
    console.warn("could not colour a code block", error);
  }
}
