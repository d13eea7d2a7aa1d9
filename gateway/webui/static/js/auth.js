// Who the page is, towards the gateway: all of the UI's sign-in glue lives in this one module.
//
// Three ways the gateway may let us in, found out in this order:
//   1. accounts (DeerFlow's /api/v1/auth/*): an HttpOnly session cookie set by login, and the
//      `csrf_token` cookie echoed as `X-CSRF-Token` on every state-changing request;
//   2. bearer tokens (gateway.tokens): a token typed once, kept in localStorage, sent as
//      `Authorization: Bearer ...` (the gateway also takes `x-api-key`);
//   3. loopback single user (no tokens): nothing to send.
// `headers(method)` is what every request adds; `signIn()` shows whichever form is needed and
// resolves once the gateway answers us.

const TOKEN_KEY = "antler.token";
const STATE_CHANGING = new Set(["POST", "PUT", "PATCH", "DELETE"]);

export const session = {
  mode: "unknown", // "accounts" | "token" | "open" | "signin" (not in yet)
  user: null, // accounts: {id, email, system_role}; token/open: {id: label}
};

function storedToken() {
  try {
    return localStorage.getItem(TOKEN_KEY) || "";
  } catch {
    return "";
  }
}

function cookie(name) {
  for (const part of document.cookie.split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return decodeURIComponent(rest.join("="));
  }
  return "";
}

/** The headers that identify us, for a request with this method. */
export function headers(method = "GET") {
  const out = {};
  const token = storedToken();
  if (token) out.Authorization = `Bearer ${token}`;
  if (STATE_CHANGING.has(method.toUpperCase())) {
    const csrf = cookie("csrf_token");
    if (csrf) out["X-CSRF-Token"] = csrf;
  }
  return out;
}

async function probe(path, init = {}) {
  try {
    return await fetch(path, { credentials: "same-origin", cache: "no-store", ...init });
  } catch {
    return null;
  }
}

async function detail(response, fallback) {
  try {
    const body = await response.json();
    const d = body.detail ?? body;
    if (typeof d === "string") return d;
    if (d && typeof d.message === "string") return d.message;
    if (Array.isArray(d) && d[0]?.msg) return d[0].msg;
  } catch {
    /* not JSON */
  }
  return fallback;
}

/** Whether the gateway lets us in as we are: resolves to a mode, or null when we must sign in.
 * `/api/v1/auth/me` answers for a session cookie, a stored token, or the loopback single user
 * (its `via` says which); a 401 means signing in, and `setup-status` says whether an admin
 * account must be created first. */
async function currentAccess() {
  const me = await probe("/api/v1/auth/me", { headers: headers() });
  if (me && me.ok) {
    session.user = await me.json();
    if (!session.user.needs_setup) {
      // single-user mode answers DeerFlow's auth-disabled user, which has no `via`
      const via = session.user.via || "open";
      session.mode = via === "token" ? "token" : via === "open" ? "open" : "accounts";
      return session.mode;
    }
  } else if (!me || me.status !== 401) {
    throw new Error(me ? `the gateway answered ${me.status}` : "the gateway cannot be reached");
  }
  if (storedToken()) localStorage.removeItem(TOKEN_KEY); // unknown here (any more): ask again
  const setup = await probe("/api/v1/auth/setup-status");
  session.setup = setup && setup.ok ? await setup.json().catch(() => ({})) : {};
  const offered = await probe("/api/v1/auth/providers");
  session.providers = offered && offered.ok ? (await offered.json().catch(() => ({}))).providers || [] : [];
  session.mode = "signin";
  return null;
}

/** Why a single sign-on came back refused (`/?sso_error=<code>`), as a sentence. */
function ssoError() {
  const code = new URLSearchParams(location.search).get("sso_error");
  return code ? `Single sign-on did not sign you in (${code}). Try again, or ask your administrator.` : "";
}

/** One button per configured identity provider (single sign-on), above the password form. */
function providerButtons(box) {
  const providers = session.providers || [];
  if (!providers.length) return;
  const list = document.createElement("div");
  list.className = "sso-providers";
  for (const provider of providers) {
    const link = document.createElement("a");
    link.className = "button primary sso";
    link.href = `/api/v1/auth/oauth/${encodeURIComponent(provider.id)}?next=${encodeURIComponent("/")}`;
    link.textContent = `Sign in with ${provider.display_name}`;
    link.dataset.provider = provider.id;
    list.append(link);
  }
  const or = document.createElement("p");
  or.className = "muted or";
  or.textContent = "or";
  box.querySelector("h1").after(list, or);
}

/** A link under a form that switches to the other way of signing in. */
function switchLink(box, text, onClick) {
  const swap = document.createElement("button");
  swap.type = "button";
  swap.className = "link";
  swap.textContent = text;
  swap.addEventListener("click", onClick);
  box.append(swap);
}

function form(root, title, fields, submitLabel, note = "") {
  root.replaceChildren();
  const box = document.createElement("form");
  box.className = "signin-box";
  const h = document.createElement("h1");
  h.textContent = title;
  box.append(h);
  if (note) {
    const p = document.createElement("p");
    p.className = "muted";
    p.textContent = note;
    box.append(p);
  }
  const inputs = {};
  for (const f of fields) {
    const label = document.createElement("label");
    label.textContent = f.label;
    const input = document.createElement("input");
    Object.assign(input, { name: f.name, type: f.type || "text", required: true });
    input.autocomplete = f.autocomplete || "off";
    label.append(input);
    box.append(label);
    inputs[f.name] = input;
  }
  const error = document.createElement("p");
  error.className = "error";
  error.setAttribute("role", "alert");
  const button = document.createElement("button");
  button.type = "submit";
  button.className = "primary";
  button.textContent = submitLabel;
  box.append(error, button);
  root.append(box);
  root.hidden = false;
  inputs[fields[0].name].focus();
  return { box, inputs, error };
}

function tokenForm(root) {
  return new Promise((resolve) => {
    const { box, inputs, error } = form(
      root,
      "Sign in to Antler",
      [{ name: "token", label: "Access token", type: "password" }],
      "Sign in",
      "An access token from gateway.tokens in config.yaml; it stays in this browser.",
    );
    switchLink(box, session.setup?.needs_setup ? "Create the admin account" : "Sign in with email", () =>
      resolve("accounts"),
    );
    box.addEventListener("submit", async (event) => {
      event.preventDefault();
      const token = inputs.token.value.trim();
      const answer = await probe("/api/models", { headers: { Authorization: `Bearer ${token}` } });
      if (!answer || !answer.ok) {
        error.textContent = answer?.status === 401 ? "That token is not known here." : "The gateway did not answer.";
        return;
      }
      localStorage.setItem(TOKEN_KEY, token);
      resolve();
    });
  });
}

function accountForm(root, setup) {
  return new Promise((resolve) => {
    let registering = false;
    const draw = () => {
      const initializing = setup.needs_setup;
      const title = initializing ? "Create the admin account" : registering ? "Create an account" : "Sign in to Antler";
      const fields = [
        { name: "email", label: "Email", type: "email", autocomplete: "username" },
        { name: "password", label: "Password", type: "password", autocomplete: initializing || registering ? "new-password" : "current-password" },
      ];
      const note = initializing ? "No account exists yet: this one will be the administrator's." : "";
      const { box, inputs, error } = form(root, title, fields, initializing || registering ? "Create account" : "Sign in", note);
      providerButtons(box);
      if (!initializing && !registering) error.textContent = ssoError();
      switchLink(box, "Use an access token", () => resolve("token"));
      if (!initializing && setup.registration_enabled !== false) {
        const swap = document.createElement("button");
        swap.type = "button";
        swap.className = "link";
        swap.textContent = registering ? "I have an account" : "Create an account";
        swap.addEventListener("click", () => {
          registering = !registering;
          draw();
        });
        box.append(swap);
      }
      box.addEventListener("submit", async (event) => {
        event.preventDefault();
        const email = inputs.email.value.trim();
        const password = inputs.password.value;
        let answer;
        if (initializing || registering) {
          answer = await probe(initializing ? "/api/v1/auth/initialize" : "/api/v1/auth/register", {
            method: "POST",
            headers: { "Content-Type": "application/json" },
            body: JSON.stringify({ email, password, remember_me: true }),
          });
        } else {
          answer = await probe("/api/v1/auth/login/local", {
            method: "POST",
            headers: { "Content-Type": "application/x-www-form-urlencoded" },
            body: new URLSearchParams({ username: email, password, remember_me: "true" }),
          });
        }
        if (!answer || !answer.ok) {
          error.textContent = answer ? await detail(answer, "Signing in failed.") : "The gateway did not answer.";
          return;
        }
        resolve();
      });
    };
    draw();
  });
}

/** Resolves once the gateway lets us in, showing a sign-in form in `root` while it does not. */
export async function signIn(root) {
  let showing = null;
  for (;;) {
    if (await currentAccess()) {
      root.hidden = true;
      root.replaceChildren();
      return session;
    }
    // With no account yet, creating the admin leads (the token form is a link away).
    showing = showing || "accounts";
    const chosen = showing === "accounts" ? await accountForm(root, session.setup || {}) : await tokenForm(root);
    showing = chosen || showing;
  }
}

/** Forget who we are (the token, or the session cookie) and start again. */
export async function signOut() {
  let endSession = null; // signed in by single sign-on: the provider's session ends too
  if (session.mode === "accounts") {
    const answer = await probe("/api/v1/auth/logout", { method: "POST", headers: headers("POST") });
    endSession = answer && answer.ok ? (await answer.json().catch(() => ({}))).end_session_url : null;
  }
  localStorage.removeItem(TOKEN_KEY);
  if (endSession) location.assign(endSession);
  else location.reload();
}

/** Whether signing out means anything here (not on the loopback single-user gateway). */
export function canSignOut() {
  return session.mode === "accounts" || session.mode === "token";
}
