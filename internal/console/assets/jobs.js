// A job's progress from successive samples of its counters: the rate over
// the last samples and the time left when the total is known.

// WINDOW is how far back (ms) the rate looks: long enough to smooth the
// batches a job writes in, short enough to follow a change of pace.
export const WINDOW = 10000;

// addSample records {at, items, bytes} in samples (oldest first), keeping
// those of the last WINDOW and the one just before it.
export function addSample(samples, s) {
  samples.push(s);
  while (samples.length > 2 && s.at - samples[1].at >= WINDOW) samples.shift();
  return samples;
}

// progress is {rate (items/s), byteRate (bytes/s), eta (seconds left),
// fraction (0..1)} from samples and the totals (0 or null: unknown);
// a member is null when it cannot be told yet.
export function progress(samples, totalItems, totalBytes) {
  const out = { rate: null, byteRate: null, eta: null, fraction: null };
  const last = samples[samples.length - 1];
  if (!last) return out;
  if (totalItems > 0) out.fraction = Math.min(1, last.items / totalItems);
  else if (totalBytes > 0) out.fraction = Math.min(1, last.bytes / totalBytes);
  const first = samples[0];
  const dt = (last.at - first.at) / 1000;
  if (samples.length < 2 || dt <= 0) return out;
  out.rate = (last.items - first.items) / dt;
  out.byteRate = (last.bytes - first.bytes) / dt;
  if (totalItems > 0 && out.rate > 0) out.eta = Math.max(0, (totalItems - last.items) / out.rate);
  else if (totalBytes > 0 && out.byteRate > 0) out.eta = Math.max(0, (totalBytes - last.bytes) / out.byteRate);
  return out;
}

// duration renders seconds as "1h 02m", "3m 05s" or "7s".
export function duration(s) {
  if (s == null || !Number.isFinite(s)) return "";
  s = Math.round(s);
  if (s >= 3600) return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  if (s >= 60) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${s}s`;
}
