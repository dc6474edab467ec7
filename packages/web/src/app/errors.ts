import type { ErrorReport } from "./protocol.js";

/** Turns anything thrown into what can cross postMessage: an InferenceError's code, else the runtime's. */
export function reportOf(error: unknown): ErrorReport {
  if (typeof error === "object" && error !== null && "message" in error) {
    const { code, message, name } = error as { code?: unknown; message: unknown; name?: unknown };
    return {
      code: typeof code === "string" ? code : "INTERNAL",
      message: String(message),
      ...(typeof code === "string" || typeof name !== "string" ? {} : { name }),
    };
  }
  return { code: "INTERNAL", message: String(error) };
}

/** A heading people understand, per failure; the engine's message (which names sizes, files, URLs) follows it. */
export function headlineOf(error: ErrorReport): string {
  if (error.code === "MODEL_FORMAT" || error.code === "NO_BACKEND_FOR_FORMAT") return "This file is not a model the engine can read (it expects a GGUF file).";
  if (error.code === "UNSUPPORTED_ARCHITECTURE" || error.code === "UNSUPPORTED_DTYPE") return "This model's architecture or weight type is not supported yet.";
  if (error.code === "MODEL_NOT_FOUND" || error.code === "IO") return "The model could not be downloaded or read.";
  if (error.code === "CONTEXT_OVERFLOW") return "The conversation no longer fits the model's context: reset it to go on.";
  if (error.code === "BACKEND_UNAVAILABLE") return "The engine could not start in this page.";
  if (error.code === "INVALID_OPTION") return "A setting or the model reference is not valid.";
  if (error.name === "RangeError" || /out of memory|memory/i.test(error.message)) return "The model is too large for the memory this browser grants the page.";
  if (error.name === "TypeError" && /fetch/i.test(error.message)) return "The network request failed (offline, blocked, or the server sends no CORS headers).";
  return "Something went wrong.";
}
