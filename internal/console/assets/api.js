// The DynamoDB JSON API from the page: POST / with X-Amz-Target, signed
// with AWS Signature Version 4 (WebCrypto HMAC-SHA256), exactly as an SDK
// signs. The secret never leaves this module except into sessionStorage.

const enc = new TextEncoder();
const REGION = "us-east-1";
const SERVICE = "dynamodb";
const STORAGE_KEY = "extenddb.console.credentials";

// The placeholder key signs requests on a server without access keys
// configured, which accepts any well-formed signature.
export const PLACEHOLDER = Object.freeze({ accessKeyId: "EXTENDDBCONSOLE0", secretAccessKey: "extenddb-console-placeholder", placeholder: true });

function hex(buf) {
  return Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function sha256Hex(text) {
  return hex(await crypto.subtle.digest("SHA-256", enc.encode(text)));
}

async function hmac(key, msg) {
  const k = await crypto.subtle.importKey("raw", typeof key === "string" ? enc.encode(key) : key,
    { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return crypto.subtle.sign("HMAC", k, enc.encode(msg));
}

// amzDate formats an instant as SigV4's basic ISO 8601 (20060102T150405Z).
export function amzDate(d) {
  return d.toISOString().replace(/[-:]/g, "").replace(/\.\d{3}/, "");
}

// sign returns the headers of a signed POST / of body with target, as
// sent to host (the page's own host, which the browser sends as Host).
export async function sign(creds, host, target, body, now = new Date()) {
  const date = amzDate(now);
  const day = date.slice(0, 8);
  const payloadHash = await sha256Hex(body);
  const headers = {
    "content-type": "application/x-amz-json-1.0",
    "host": host,
    "x-amz-content-sha256": payloadHash,
    "x-amz-date": date,
    "x-amz-target": target,
  };
  const names = Object.keys(headers).sort();
  const canonical = ["POST", "/", "", ...names.map((n) => n + ":" + headers[n]), "", names.join(";"), payloadHash].join("\n");
  const scope = `${day}/${REGION}/${SERVICE}/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", date, scope, await sha256Hex(canonical)].join("\n");
  let k = await hmac("AWS4" + creds.secretAccessKey, day);
  k = await hmac(k, REGION);
  k = await hmac(k, SERVICE);
  k = await hmac(k, "aws4_request");
  const signature = hex(await hmac(k, toSign));
  delete headers.host; // set by the browser, which refuses it from a page
  headers["authorization"] = `AWS4-HMAC-SHA256 Credential=${creds.accessKeyId}/${scope}, SignedHeaders=${names.join(";")}, Signature=${signature}`;
  return headers;
}

export class APIError extends Error {
  constructor(type, message, status) {
    super(message ? `${type}: ${message}` : type);
    this.type = type;
    this.status = status;
  }
}

// AUTH_ERRORS are the answers to a request whose key or signature the
// server does not accept.
export const AUTH_ERRORS = new Set(["UnrecognizedClientException", "InvalidSignatureException",
  "MissingAuthenticationTokenException", "IncompleteSignatureException"]);

export class Client {
  constructor(creds) {
    this.creds = creds;
    this.skewMs = 0; // the server's clock minus this one's
  }

  async send(target, body) {
    const headers = await sign(this.creds, location.host, target, body, new Date(Date.now() + this.skewMs));
    try {
      return await fetch("/", { method: "POST", headers, body, credentials: "omit", cache: "no-store" });
    } catch (e) {
      throw new APIError("NetworkError", "the server did not answer (" + e.message + ")", 0);
    }
  }

  // correctSkew adopts the server's clock when a reply says the signature
  // expired; it reports whether a retry could help.
  correctSkew(r) {
    const server = Date.parse(r.headers.get("Date") || "");
    if (Number.isNaN(server)) return false;
    const skew = server - Date.now();
    if (Math.abs(skew - this.skewMs) < 5 * 60 * 1000) return false;
    this.skewMs = skew;
    return true;
  }

  async call(op, input = {}) {
    const body = JSON.stringify(input);
    const target = "DynamoDB_20120810." + op;
    let r = await this.send(target, body);
    // A signature outside the server's clock-skew window is signed again
    // at the server's time (its Date header), once, as the SDKs do.
    if (r.status === 400 && this.correctSkew(r)) r = await this.send(target, body);
    const text = await r.text();
    let j = {};
    try {
      j = text ? JSON.parse(text) : {};
    } catch {
      j = { message: text.slice(0, 200) };
    }
    if (!r.ok) {
      const type = String(j.__type || "HTTP " + r.status).split("#").pop();
      throw new APIError(type, j.message || j.Message || "", r.status);
    }
    return j;
  }
}

export function loadCredentials() {
  try {
    const c = JSON.parse(sessionStorage.getItem(STORAGE_KEY) || "null");
    if (c && typeof c.accessKeyId === "string" && typeof c.secretAccessKey === "string") return c;
  } catch { /* ignore a damaged entry */ }
  return null;
}

export function saveCredentials(c) {
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify({ accessKeyId: c.accessKeyId, secretAccessKey: c.secretAccessKey }));
}

export function clearCredentials() {
  sessionStorage.removeItem(STORAGE_KEY);
}
