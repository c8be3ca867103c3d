// Reading the server's Prometheus text exposition (/metrics).

// parseMetrics reads the Prometheus text format's samples of the names
// wanted: [{name, labels, value}].
export function parseMetrics(text, wanted) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m || !wanted.has(m[1])) continue;
    const labels = {};
    for (const l of (m[3] || "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

// quantile estimates the q-quantile from cumulative histogram buckets
// [[le, count]] sorted by le, interpolating inside the bucket as
// Prometheus' histogram_quantile does.
export function quantile(q, buckets) {
  if (!buckets.length) return NaN;
  const total = buckets[buckets.length - 1][1];
  if (!total) return NaN;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (le === Infinity) return prevLe;
      return prevLe + (le - prevLe) * ((rank - prevCount) / (count - prevCount || 1));
    }
    prevLe = le;
    prevCount = count;
  }
  return prevLe;
}
