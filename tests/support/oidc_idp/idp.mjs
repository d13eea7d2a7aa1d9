// A real OpenID provider on loopback for the SSO tests: panva's oidc-provider (OpenID Certified),
// with a plain sign-in page of its own and one test switch.
//
// Configured by environment (JSON): IDP_CLIENTS (oidc-provider client metadata) and IDP_ACCOUNTS
// ({login: {password, email, email_verified, name, groups}}). It listens on 127.0.0.1 on a free port
// and prints `listening on <issuer>` once it serves.
//
// The sign-in page is a form (`login`, `password`); consent is granted at once for what the client
// asked. `POST /test/next-id-token {"mode": ...}` makes the next token response carry a tampered
// ID token, once: `wrong_audience`, `expired` (both signed with the provider's key) or
// `bad_signature` (same kid, another key), so the relying party's checks meet real bad tokens.

import http from "node:http";
import { URL } from "node:url";

import * as jose from "jose";
import Provider from "oidc-provider";

const clients = JSON.parse(process.env.IDP_CLIENTS || "[]");
const accounts = JSON.parse(process.env.IDP_ACCOUNTS || "{}");

const { privateKey } = await jose.generateKeyPair("RS256", { extractable: true });
const signing = { ...(await jose.exportJWK(privateKey)), kid: "idp-key-1", alg: "RS256", use: "sig" };
const { privateKey: strangerKey } = await jose.generateKeyPair("RS256", { extractable: true });

let provider = null;
let nextMode = null;

function page(res, status, body) {
  res.writeHead(status, { "content-type": "text/html; charset=utf-8" });
  res.end(`<!doctype html><html><head><title>Test IdP</title></head><body>${body}</body></html>`);
}

function escape(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function loginForm(uid, error = "") {
  return `<h1>Sign in to the test IdP</h1>${error ? `<p id="error">${escape(error)}</p>` : ""}
<form method="post" action="/interaction/${escape(uid)}/login">
<label>Login <input name="login" autocomplete="username"></label>
<label>Password <input name="password" type="password" autocomplete="current-password"></label>
<button type="submit" id="idp-submit">Sign in</button></form>`;
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

async function interaction(req, res, url) {
  const details = await provider.interactionDetails(req, res);
  const { uid, prompt, params, session } = details;
  if (req.method === "POST" && url.pathname.endsWith("/login")) {
    const form = new URLSearchParams(await readBody(req));
    const login = form.get("login") || "";
    const account = accounts[login];
    if (!account || account.password !== form.get("password")) {
      page(res, 200, loginForm(uid, "Wrong login or password"));
      return;
    }
    await provider.interactionFinished(req, res, { login: { accountId: login } }, { mergeWithLastSubmission: false });
    return;
  }
  if (prompt.name === "login") {
    page(res, 200, loginForm(uid));
    return;
  }
  // consent: grant what the client asked for
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  const missing = prompt.details || {};
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(" "));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

async function tampered(idToken, mode) {
  const claims = jose.decodeJwt(idToken);
  const now = Math.floor(Date.now() / 1000);
  let key = privateKey;
  if (mode === "wrong_audience") claims.aud = "some-other-client";
  if (mode === "expired") Object.assign(claims, { iat: now - 7200, exp: now - 3600 });
  if (mode === "bad_signature") key = strangerKey;
  return new jose.SignJWT(claims).setProtectedHeader({ alg: "RS256", kid: signing.kid, typ: "JWT" }).sign(key);
}

function tamperNextToken(res, mode) {
  const end = res.end.bind(res);
  res.end = (body, ...rest) => {
    let text = body ? body.toString() : "";
    let answer;
    try {
      answer = JSON.parse(text);
    } catch {
      return end(body, ...rest);
    }
    if (!answer.id_token) return end(body, ...rest);
    tampered(answer.id_token, mode).then((token) => {
      answer.id_token = token;
      text = JSON.stringify(answer);
      res.setHeader("content-length", Buffer.byteLength(text));
      end(text);
    });
    return res;
  };
}

const server = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, provider.issuer);
    if (url.pathname === "/test/next-id-token" && req.method === "POST") {
      nextMode = JSON.parse(await readBody(req)).mode || null;
      res.writeHead(204).end();
      return;
    }
    if (url.pathname.startsWith("/interaction/")) {
      await interaction(req, res, url);
      return;
    }
    if (url.pathname === "/token" && req.method === "POST" && nextMode) {
      const mode = nextMode;
      nextMode = null;
      tamperNextToken(res, mode);
    }
    provider.callback()(req, res);
  } catch (err) {
    console.error(err);
    if (!res.headersSent) page(res, 500, escape(err.message));
  }
});

server.listen(0, "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  provider = new Provider(issuer, {
    clients,
    jwks: { keys: [signing] },
    pkce: { required: () => true },
    features: { devInteractions: { enabled: false }, rpInitiatedLogout: { enabled: true } },
    claims: {
      openid: ["sub"],
      email: ["email", "email_verified"],
      profile: ["name"],
      groups: ["groups"],
    },
    scopes: ["openid", "email", "profile", "groups"],
    conformIdTokenClaims: false, // the ID token carries the scopes' claims (email, groups)
    cookies: { keys: ["antler-test-idp-cookie-key"] },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    findAccount: async (ctx, id) => {
      const account = accounts[id];
      if (!account) return undefined;
      const { password, ...claims } = account;
      return { accountId: id, claims: async () => ({ sub: id, ...claims }) };
    },
  });
  provider.on("server_error", (ctx, err) => console.error("server_error", err));
  console.log(`listening on ${issuer}`);
});

process.on("SIGTERM", () => server.close(() => process.exit(0)));
