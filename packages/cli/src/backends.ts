/**
 * The engine packages register their backends when imported. They are
 * loaded by name at runtime so the CLI still works (with whatever backends
 * exist) when one of them is not installed or cannot start on this machine.
 */
const BACKEND_PACKAGES = ["@infer/wasm", "@infer/llama-cpp", "@infer/remote"];

let loaded: Promise<string[]> | undefined;

/** Imports every backend package that is present; returns the problems of those that failed. */
export function registerBackends(): Promise<string[]> {
  loaded ??= (async () => {
    const problems: string[] = [];
    for (const name of BACKEND_PACKAGES) {
      try {
        await import(name);
      } catch (error) {
        problems.push(`${name}: ${(error as Error).message.split("\n")[0]}`);
      }
    }
    return problems;
  })();
  return loaded;
}
