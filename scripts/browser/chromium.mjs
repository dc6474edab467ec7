// Finds (and on a bare CI machine installs) the Chromium that browser tests drive.
// No browser is downloaded at npm install time: puppeteer-core only drives an existing binary.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

const DEBIAN_CHROMIUM = "/usr/bin/chromium";

/**
 * The Chromium executable: $CHROMIUM_PATH when set, else Debian's /usr/bin/chromium, installed with
 * apt-get when it is missing and this process runs as root (CI's clean Debian machine reaches apt).
 * Returns undefined when there is none and none can be installed, so callers can skip with a reason.
 */
export function findChromium() {
  const wanted = process.env.CHROMIUM_PATH ?? DEBIAN_CHROMIUM;
  if (existsSync(wanted)) return wanted;
  if (wanted !== DEBIAN_CHROMIUM || process.getuid?.() !== 0) return undefined;
  // Test files run in parallel and may each get here: the second apt-get waits for the first's lock.
  const apt = (...args) =>
    spawnSync("apt-get", ["-o", "DPkg::Lock::Timeout=600", ...args], { stdio: "inherit", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
  // A fresh machine may have empty package lists; update only when the first install fails.
  if (apt("install", "-y", "chromium").status !== 0) {
    apt("update");
    apt("install", "-y", "chromium");
  }
  return existsSync(wanted) ? wanted : undefined;
}
