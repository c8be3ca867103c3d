// Unit checks of the console's modules that need no browser: reading
// /metrics, histogram quantiles, value rendering, the SigV4 date format
// and signature (against node's own HMAC, an independent implementation).
//   node tests/console/unit_test.mjs
import { createHash, createHmac } from "node:crypto";
import assert from "node:assert/strict";
import { parseMetrics, quantile } from "../../internal/console/assets/metrics.js";
import { valueText, cellText, plain } from "../../internal/console/assets/dom.js";
import { amzDate, sign } from "../../internal/console/assets/api.js";
import { addSample, progress, duration, WINDOW } from "../../internal/console/assets/jobs.js";

let passed = 0;
const failed = [];
async function check(name, fn) {
  try { await fn(); passed++; } catch (e) { failed.push(name); console.log("console unit: FAIL", name + ":", e.message); }
}

await check("parseMetrics reads names, labels with escapes, values", () => {
  const text = [
    "# HELP extenddb_requests_total x",
    "# TYPE extenddb_requests_total counter",
    'extenddb_requests_total{code="",operation="PutItem"} 7',
    'extenddb_requests_total{code="ValidationException",operation="PutItem"} 2',
    'extenddb_build_info{commit="abc",go="go1.26",version="v1 \\"q\\"\\\\x"} 1',
    "extenddb_ttl_backlog_items 3",
    "other_metric 9",
  ].join("\n");
  const got = parseMetrics(text, new Set(["extenddb_requests_total", "extenddb_build_info", "extenddb_ttl_backlog_items"]));
  assert.equal(got.length, 4);
  assert.deepEqual(got[0], { name: "extenddb_requests_total", labels: { code: "", operation: "PutItem" }, value: 7 });
  assert.equal(got[1].labels.code, "ValidationException");
  assert.equal(got[2].labels.version, 'v1 "q"\\x');
  assert.deepEqual(got[3], { name: "extenddb_ttl_backlog_items", labels: {}, value: 3 });
});

await check("quantile interpolates inside the bucket", () => {
  const b = [[0.001, 50], [0.01, 90], [0.1, 100], [Infinity, 100]];
  assert.equal(quantile(0.5, b), 0.001);
  assert.ok(Math.abs(quantile(0.7, b) - (0.001 + 0.009 * (20 / 40))) < 1e-12);
  assert.ok(Math.abs(quantile(0.99, b) - (0.01 + 0.09 * 0.9)) < 1e-12);
  assert.ok(Number.isNaN(quantile(0.5, [])));
  assert.ok(Number.isNaN(quantile(0.5, [[1, 0], [Infinity, 0]])));
  assert.equal(quantile(0.99, [[0.1, 1], [Infinity, 10]]), 0.1); // in +Inf: the last finite bound
});

await check("values render as text, binary by length, long values shortened", () => {
  assert.equal(valueText({ S: "<b>x</b>" }), "<b>x</b>");
  assert.equal(valueText({ B: "AAEC" }), "<binary 3 bytes>");
  assert.equal(valueText({ M: { a: { N: "1" }, l: { L: [{ BOOL: true }, { NULL: true }] } } }), '{"a": 1, "l": [true, null]}');
  assert.equal(valueText({ SS: ["a", "b"] }), '{"a", "b"}');
  assert.equal(cellText({ S: "x".repeat(500) }).length, 121);
  assert.deepEqual(plain({ M: { n: { N: "12345678901234567890" }, f: { N: "1.5" }, s: { SS: ["a"] } } }),
    { n: "12345678901234567890", f: 1.5, s: ["a"] });
});

await check("SigV4: date format and signature", async () => {
  const now = new Date(Date.UTC(2026, 11, 4, 23, 5, 9, 123));
  assert.equal(amzDate(now), "20261204T230509Z");
  const creds = { accessKeyId: "AKIDEXAMPLE00000", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" };
  const body = '{"TableName":"t"}';
  const hdr = await sign(creds, "127.0.0.1:8000", "DynamoDB_20120810.DescribeTable", body, now);
  const sha = (s) => createHash("sha256").update(s).digest("hex");
  const canonical = ["POST", "/", "",
    "content-type:application/x-amz-json-1.0", "host:127.0.0.1:8000", "x-amz-content-sha256:" + sha(body),
    "x-amz-date:20261204T230509Z", "x-amz-target:DynamoDB_20120810.DescribeTable", "",
    "content-type;host;x-amz-content-sha256;x-amz-date;x-amz-target", sha(body)].join("\n");
  const scope = "20261204/us-east-1/dynamodb/aws4_request";
  const sts = ["AWS4-HMAC-SHA256", "20261204T230509Z", scope, sha(canonical)].join("\n");
  let k = createHmac("sha256", "AWS4" + creds.secretAccessKey).update("20261204").digest();
  for (const part of ["us-east-1", "dynamodb", "aws4_request"]) k = createHmac("sha256", k).update(part).digest();
  const sig = createHmac("sha256", k).update(sts).digest("hex");
  assert.equal(hdr.authorization, `AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE00000/${scope}, ` +
    `SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-target, Signature=${sig}`);
  assert.equal(hdr.host, undefined, "the page cannot send Host; the browser does");
  assert.equal(hdr["x-amz-target"], "DynamoDB_20120810.DescribeTable");
});

await check("job progress: rate over the window, ETA from the total", () => {
  const samples = [];
  assert.deepEqual(progress(samples, 100, 0), { rate: null, byteRate: null, eta: null, fraction: null });
  addSample(samples, { at: 0, items: 0, bytes: 0 });
  assert.equal(progress(samples, 1000, 0).rate, null, "one sample has no rate");
  addSample(samples, { at: 2000, items: 200, bytes: 20000 });
  let p = progress(samples, 1000, 0);
  assert.equal(p.rate, 100);
  assert.equal(p.byteRate, 10000);
  assert.equal(p.eta, 8);
  assert.equal(p.fraction, 0.2);
  // Old samples leave the window: the rate follows the recent pace.
  for (let t = 3000; t <= 30000; t += 1000) addSample(samples, { at: t, items: 200 + (t - 2000) / 10, bytes: 0 });
  assert.ok(samples[1].at > 30000 - WINDOW, "samples older than the window kept: " + samples[1].at);
  p = progress(samples, 1000, 0);
  assert.ok(Math.abs(p.rate - 100) < 1e-9, "rate " + p.rate);
  // Without an item total the bytes total gives the ETA; none: no ETA.
  assert.equal(progress([{ at: 0, items: 0, bytes: 0 }, { at: 1000, items: 5, bytes: 50 }], 0, 500).eta, 9);
  assert.equal(progress([{ at: 0, items: 0, bytes: 0 }, { at: 1000, items: 5, bytes: 50 }], 0, 0).eta, null);
  assert.equal(progress([{ at: 0, items: 0, bytes: 0 }, { at: 1000, items: 0, bytes: 0 }], 10, 0).eta, null, "a stalled job has no ETA");
});

await check("durations read as h/m/s", () => {
  assert.equal(duration(7.4), "7s");
  assert.equal(duration(185), "3m 05s");
  assert.equal(duration(3720), "1h 02m");
  assert.equal(duration(null), "");
  assert.equal(duration(Infinity), "");
});

console.log(`console unit: ${passed} passed, ${failed.length} failed`);
process.exit(failed.length ? 1 : 0);
