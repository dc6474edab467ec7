/** Physical core count: the default thread count (SIMD kernels gain little from a core's second hardware thread). */
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";

export function physicalCoreCount(): number {
  const logical = availableParallelism();
  try {
    // Linux: one distinct (physical id, core id) pair per core.
    const cores = new Set<string>();
    let physical = "0";
    for (const line of readFileSync("/proc/cpuinfo", "utf8").split("\n")) {
      const [key, value] = line.split(":").map((part) => part.trim());
      if (key === "physical id") physical = value ?? "0";
      else if (key === "core id") cores.add(`${physical}:${value}`);
    }
    // availableParallelism respects CPU affinity; never exceed it.
    return cores.size > 0 ? Math.min(cores.size, logical) : logical;
  } catch {
    return logical;
  }
}
