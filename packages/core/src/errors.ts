/**
 * Every failure the toolkit reports is an `InferenceError` with a stable `code`.
 * Application code branches on `code`; the message is for people and names the
 * file, field or option at fault.
 */
export const ERROR_CODES = [
  "BACKEND_NOT_FOUND",
  "BACKEND_UNAVAILABLE",
  "NO_BACKEND_FOR_FORMAT",
  "MODEL_NOT_FOUND",
  "MODEL_FORMAT",
  "UNSUPPORTED_ARCHITECTURE",
  "UNSUPPORTED_DTYPE",
  "NO_CHAT_TEMPLATE",
  "INVALID_OPTION",
  "CONTEXT_OVERFLOW",
  "ABORTED",
  "CLOSED",
  "TRAINING_UNSUPPORTED",
  /** trainStep on a model with no adapter applied (applyLoRA first). */
  "NO_ADAPTER",
  /** Training met a NaN or infinite loss or gradient; the message names the step. */
  "TRAINING_DIVERGED",
  "UNSUPPORTED",
  "IO",
  "INTERNAL",
  /** The process running the model died (an isolated backend's child: a native abort, a signal, out of memory). */
  "BACKEND_CRASHED",
  /** A remote server could not be reached or kept the call waiting past its timeout (refused, reset, DNS, 429/503 after retries). */
  "REMOTE_UNAVAILABLE",
  /** A remote server answered with an error or with something that is not its protocol; `details` carry the status and its message. */
  "REMOTE_ERROR",
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export interface InferenceErrorOptions {
  cause?: unknown;
  /** Machine-readable context: the file, field, option or numbers involved. */
  details?: Record<string, unknown>;
}

export class InferenceError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, options: InferenceErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "InferenceError";
    this.code = code;
    this.details = options.details ?? {};
  }

  override toString(): string {
    return `InferenceError [${this.code}]: ${this.message}`;
  }
}

export function isInferenceError(value: unknown, code?: ErrorCode): value is InferenceError {
  return value instanceof InferenceError && (code === undefined || value.code === code);
}

/**
 * Wraps anything thrown by a backend or library into an `InferenceError`,
 * keeping an existing one untouched so codes survive layers.
 */
export function toInferenceError(value: unknown, fallback: ErrorCode = "INTERNAL", context?: string): InferenceError {
  if (value instanceof InferenceError) return value;
  const message = value instanceof Error ? value.message : String(value);
  return new InferenceError(fallback, context ? `${context}: ${message}` : message, { cause: value });
}

export function abortedError(reason?: unknown): InferenceError {
  const why = reason instanceof Error ? `: ${reason.message}` : typeof reason === "string" ? `: ${reason}` : "";
  return new InferenceError("ABORTED", `the call was aborted${why}`, { cause: reason });
}

export function closedError(what = "model"): InferenceError {
  return new InferenceError("CLOSED", `the ${what} is closed; load it again to use it`);
}
