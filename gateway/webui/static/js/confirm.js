// An in-page confirmation (a modal <dialog>), instead of the browser's confirm(): it looks like the
// page, says what will happen on its button, and cannot be suppressed by "don't ask again".

import { el } from "./dom.js";

/** Resolves true when the user presses `action`, false on Cancel, Escape or a click outside. */
export function confirmInPage(question, action, detail = "") {
  return new Promise((resolve) => {
    const dialog = el(
      "dialog",
      { class: "confirm", "aria-label": question },
      el("p", { class: "confirm-question", text: question }),
      detail ? el("p", { class: "muted", text: detail }) : null,
      el(
        "div",
        { class: "confirm-bar" },
        el("button", { type: "button", class: "confirm-cancel", text: "Cancel", onclick: () => dialog.close("cancel") }),
        el("button", { type: "button", class: "danger", text: action, onclick: () => dialog.close("yes") }),
      ),
    );
    dialog.addEventListener("click", (event) => {
      if (event.target === dialog) dialog.close("cancel"); // the backdrop
    });
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(dialog.returnValue === "yes");
    });
    document.body.append(dialog);
    dialog.showModal();
    dialog.querySelector(".confirm-cancel").focus();
  });
}
