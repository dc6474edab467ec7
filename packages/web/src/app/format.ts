/** Numbers as the page shows them. */

const UNITS = ["B", "KB", "MB", "GB", "TB"];

/** 1536 -> "1.5 KB" (powers of 1024, as memory limits are). */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(value < 10 ? 1 : 0)} ${UNITS[unit]}`;
}

/** 95 -> "1 min 35 s"; 3700 -> "1 h 2 min". */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/**
 * A download's speed and time left from its progress reports: the speed is averaged over the
 * last few seconds (WINDOW_MS), so it follows changes without jumping at every chunk.
 */
export class DownloadMeter {
  static readonly WINDOW_MS = 3000;
  private samples: Array<{ at: number; bytes: number }> = [];

  /** Records `loadedBytes` at time `at` (ms); returns the bytes per second, 0 until two samples. */
  update(loadedBytes: number, at: number): number {
    this.samples.push({ at, bytes: loadedBytes });
    while (this.samples.length > 2 && at - this.samples[1]!.at >= DownloadMeter.WINDOW_MS) this.samples.shift();
    const first = this.samples[0]!;
    const elapsed = at - first.at;
    return elapsed > 0 ? ((loadedBytes - first.bytes) * 1000) / elapsed : 0;
  }

  /** "12.3 MB of 100 MB · 4.1 MB/s · 21 s left"; parts unknown so far are left out. */
  describe(loadedBytes: number, totalBytes: number | undefined, bytesPerSecond: number): string {
    const parts = [totalBytes ? `${formatBytes(loadedBytes)} of ${formatBytes(totalBytes)}` : formatBytes(loadedBytes)];
    if (bytesPerSecond > 0) {
      parts.push(`${formatBytes(bytesPerSecond)}/s`);
      if (totalBytes) parts.push(`${formatDuration((totalBytes - loadedBytes) / bytesPerSecond)} left`);
    }
    return parts.join(" · ");
  }
}
