import { type ErrorCode, InferenceError, isInferenceError } from "@infer/core";

/** OpenAI's error body: `{ error: { message, type, param, code } }`. */
export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** An error that already knows its HTTP status and OpenAI error fields. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = "invalid_request_error",
    readonly code: string | null = null,
    readonly param: string | null = null,
    /** Extra response headers (Retry-After for 429, WWW-Authenticate for 401). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "HttpError";
  }

  body(): OpenAIErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

export const badRequest = (message: string, param: string | null = null, code = "invalid_value") =>
  new HttpError(400, message, "invalid_request_error", code, param);

/** How each contract error code reaches an HTTP client. */
const STATUS_BY_CODE: Record<ErrorCode, { status: number; type: string }> = {
  INVALID_OPTION: { status: 400, type: "invalid_request_error" },
  CONTEXT_OVERFLOW: { status: 400, type: "invalid_request_error" },
  NO_CHAT_TEMPLATE: { status: 400, type: "invalid_request_error" },
  UNSUPPORTED: { status: 400, type: "invalid_request_error" },
  TRAINING_UNSUPPORTED: { status: 400, type: "invalid_request_error" },
  NO_ADAPTER: { status: 400, type: "invalid_request_error" },
  TRAINING_DIVERGED: { status: 500, type: "server_error" },
  MODEL_NOT_FOUND: { status: 404, type: "invalid_request_error" },
  ABORTED: { status: 499, type: "request_aborted" },
  CLOSED: { status: 503, type: "server_error" },
  BACKEND_UNAVAILABLE: { status: 503, type: "server_error" },
  BACKEND_NOT_FOUND: { status: 500, type: "server_error" },
  NO_BACKEND_FOR_FORMAT: { status: 500, type: "server_error" },
  MODEL_FORMAT: { status: 500, type: "server_error" },
  UNSUPPORTED_ARCHITECTURE: { status: 500, type: "server_error" },
  UNSUPPORTED_DTYPE: { status: 500, type: "server_error" },
  IO: { status: 500, type: "server_error" },
  INTERNAL: { status: 500, type: "server_error" },
  // The model's own process died (see LoadOptions.isolate); the server and the model, restarted, serve on.
  BACKEND_CRASHED: { status: 502, type: "server_error" },
  // A model served by another server (backend remote) behind this one failed upstream.
  REMOTE_UNAVAILABLE: { status: 503, type: "server_error" },
  REMOTE_ERROR: { status: 502, type: "server_error" },
};

/** OpenAI's own code for the one case clients commonly branch on. */
const OPENAI_CODE: Partial<Record<ErrorCode, string>> = {
  CONTEXT_OVERFLOW: "context_length_exceeded",
  MODEL_NOT_FOUND: "model_not_found",
};

/** Turns anything thrown while serving into an `HttpError`, keeping InferenceError codes visible. */
export function toHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (isInferenceError(error)) {
    const { status, type } = STATUS_BY_CODE[error.code] ?? { status: 500, type: "server_error" };
    const param = typeof error.details.option === "string" ? error.details.option : null;
    return new HttpError(status, error.message, type, OPENAI_CODE[error.code] ?? error.code.toLowerCase(), param);
  }
  const message = error instanceof Error ? error.message : String(error);
  return new HttpError(500, `internal error: ${message}`, "server_error", "internal");
}

export { InferenceError };
