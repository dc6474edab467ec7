// @infer/server: an OpenAI-compatible HTTP API over any infer TextModel.
export { createServer, type InferServer, type ListenAddress, type ServerOptions } from "./server.js";
export { HttpError, toHttpError, type OpenAIErrorBody } from "./errors.js";
export { SlotQueue } from "./queue.js";
