import { InferenceError, type ErrorCode } from "./errors.js";

/**
 * Bounded chat template rendering. A chat template is a program (Jinja) that
 * comes from a model file or an option, so it may loop `range(1000000000)`,
 * nest loops to 10^10 steps, nest blocks 100 000 deep or double a string
 * until memory runs out. Both backends render with @huggingface/jinja, which
 * has no budget of its own; these guards give it one from the outside, so a
 * runaway template fails fast with an `InferenceError` instead of hanging
 * the process or taking gigabytes.
 *
 * The library is passed in (`JinjaEngine`, the module itself) because the
 * contract has no runtime dependencies; the backends that render depend on
 * it and share this one guard.
 */

/** The budget a render gets; every limit is far beyond what real templates use. */
export interface ChatTemplateLimits {
  /**
   * Characters in the template's own text, checked before anything reads it: the library's tokenizer
   * takes about a second for a couple of megabytes, so hostile text must be refused before it runs.
   */
  maxTemplateChars: number;
  /** Deepest nesting of blocks, brackets and unary/ternary chains in the template text (the parser recurses on each). */
  maxNesting: number;
  /** Evaluation steps (expressions and statements, plus one per item of every loop and every `range`), beyond those the inputs grant. */
  maxSteps: number;
  /** Steps granted per value in the inputs (a message, its role, its content), so long conversations still render. */
  stepsPerInput: number;
  /**
   * Deepest evaluation (macros calling macros), kept well inside the call stack: the library looks
   * variables up by recursing through one scope per macro call and turns a stack overflow there
   * into "undefined", so a limit near the stack's end gives a misleading error instead of this one.
   */
  maxDepth: number;
  /** Characters in any one value: a string, or a list or mapping with its contents; the rendered prompt included. */
  maxChars: number;
  /** Wall-clock time, the backstop for steps that are each expensive. */
  maxMillis: number;
}

export const CHAT_TEMPLATE_LIMITS: Readonly<ChatTemplateLimits> = Object.freeze({
  maxTemplateChars: 128 * 1024, // real templates, tools and all, are a few KiB to a few tens of KiB
  maxNesting: 100,
  maxSteps: 250_000,
  stepsPerInput: 100,
  maxDepth: 200, // real templates need 8-10 (Llama 3, Qwen3, Gemma 3 with tools)
  maxChars: 4 * 1024 * 1024,
  maxMillis: 2_000,
});

/** Where a template came from: `source` names it in messages, `code` is the error a broken budget raises. */
export interface ChatTemplateOrigin {
  source: string;
  code: ErrorCode;
}

// ---- The parts of @huggingface/jinja the guard drives (structural; the backends pass the module) ----

interface JinjaToken {
  type: string;
  value: string;
}
interface JinjaNode {
  type: string;
}
/** A filter application (`x | f(args)`), as far as the budget reads it. */
interface FilterNode extends JinjaNode {
  operand: JinjaNode;
  filter: JinjaNode & { callee?: { value?: string }; args?: JinjaNode[] };
}
interface JinjaValue {
  type: string;
  value: unknown;
}
interface JinjaEnvironment {
  set(name: string, value: unknown): unknown;
}
interface JinjaInterpreter {
  run(program: never): JinjaValue;
  evaluate(statement: never, environment: never): JinjaValue;
}

export interface JinjaEngine<Token extends JinjaToken, Program, Environment extends JinjaEnvironment> {
  tokenize(text: string, options: { lstrip_blocks: boolean; trim_blocks: boolean }): Token[];
  parse(tokens: Token[]): Program;
  Environment: new () => Environment;
  Interpreter: new (env: Environment) => JinjaInterpreter;
}

/**
 * Tokenizes and parses `text` the way the library's `Template` does, after
 * refusing text longer than `limits.maxTemplateChars` (before tokenizing) or
 * nesting deeper than `limits.maxNesting` (checked on the tokens, before the
 * recursive parser sees them). Parse errors are the library's, for the
 * caller to report.
 */
export function parseBoundedTemplate<Token extends JinjaToken, Program, Environment extends JinjaEnvironment>(
  jinja: JinjaEngine<Token, Program, Environment>,
  text: string,
  origin: ChatTemplateOrigin,
  limits: ChatTemplateLimits = CHAT_TEMPLATE_LIMITS,
): Program {
  if (text.length > limits.maxTemplateChars) {
    throw overBudget(origin, "maxTemplateChars", limits.maxTemplateChars, `is ${text.length} characters long`);
  }
  const tokens = jinja.tokenize(text, { lstrip_blocks: true, trim_blocks: true });
  if (templateNesting(tokens, limits.maxNesting) > limits.maxNesting) {
    throw overBudget(origin, "maxNesting", limits.maxNesting, `nests deeper than ${limits.maxNesting} levels`);
  }
  return jinja.parse(tokens);
}

/**
 * Renders a parsed template with `variables` in scope, under `limits`. A
 * template that exceeds one fails with `origin.code` naming the source and
 * the limit; errors of the template itself (raise_exception, bad operands)
 * are the library's, for the caller to report.
 */
export function renderBoundedTemplate<Token extends JinjaToken, Program, Environment extends JinjaEnvironment>(
  jinja: JinjaEngine<Token, Program, Environment>,
  program: Program,
  variables: Record<string, unknown>,
  origin: ChatTemplateOrigin,
  limits: ChatTemplateLimits = CHAT_TEMPLATE_LIMITS,
): string {
  // Inputs may legitimately be large (a long document, a long conversation): the budget grows with them.
  const inputs = measureInputs(variables);
  const budget = new RenderBudget(origin, {
    ...limits,
    maxSteps: limits.maxSteps + limits.stepsPerInput * inputs.values,
    maxChars: Math.max(limits.maxChars, 2 * inputs.chars),
  });
  const env = new jinja.Environment();
  for (const [name, value] of Object.entries(globals(budget))) env.set(name, value);
  for (const [name, value] of Object.entries(variables)) env.set(name, value);
  const interpreter = new (boundedInterpreter(jinja.Interpreter))(env, budget);
  const result = interpreter.run(program as never);
  return String(result.value);
}

// ---- The budget ----

/** How often (in steps) the clock is read. */
const CLOCK_EVERY = 1024;

class RenderBudget {
  steps = 0;
  depth = 0;
  private readonly deadline: number;
  /** The characters a list or mapping holds, memoized: values are immutable but for namespaces, which are not memoized. */
  private readonly weights = new WeakMap<object, number>();
  /** The expressions that `for` loops iterate over: their values are charged one step per item. */
  readonly loopSources = new WeakSet<object>();

  constructor(
    readonly origin: ChatTemplateOrigin,
    readonly limits: ChatTemplateLimits,
  ) {
    this.deadline = performance.now() + limits.maxMillis;
  }

  enter(): void {
    this.spend(1);
    if (++this.depth > this.limits.maxDepth) {
      throw overBudget(this.origin, "maxDepth", this.limits.maxDepth, `evaluates deeper than ${this.limits.maxDepth} levels`);
    }
  }

  spend(steps: number): void {
    const before = this.steps;
    this.steps += steps;
    if (this.steps > this.limits.maxSteps) {
      throw overBudget(this.origin, "maxSteps", this.limits.maxSteps, `takes more than ${this.limits.maxSteps} steps`);
    }
    if (Math.floor(this.steps / CLOCK_EVERY) !== Math.floor(before / CLOCK_EVERY) && performance.now() > this.deadline) {
      throw overBudget(this.origin, "maxMillis", this.limits.maxMillis, `takes longer than ${this.limits.maxMillis} ms`);
    }
  }

  /** Checks a value an evaluation produced: its size, and for a loop's iterable, one step per item. */
  produced(node: JinjaNode, value: JinjaValue): void {
    const chars = this.weight(value);
    if (chars > this.limits.maxChars) {
      throw overBudget(this.origin, "maxChars", this.limits.maxChars, `builds a value of more than ${this.limits.maxChars} characters`);
    }
    if (this.loopSources.has(node)) this.spend(itemCount(value));
  }

  private weight(value: JinjaValue): number {
    const inner = value.value;
    if (typeof inner === "string") return inner.length;
    if (typeof inner !== "object" || inner === null) return 1;
    const known = this.weights.get(inner);
    if (known !== undefined) return known;
    let total = 1;
    const items: Iterable<unknown> = inner instanceof Map ? inner.entries() : Array.isArray(inner) ? inner : [];
    for (const item of items) {
      // A mapping's entries are [key, value] pairs; a list's items are values.
      const parts = Array.isArray(item) && inner instanceof Map ? item : [item];
      for (const part of parts) total += typeof part === "string" ? part.length : isJinjaValue(part) ? this.weight(part) : 1;
      if (total > this.limits.maxChars) break;
    }
    if (value.type !== "NamespaceValue") this.weights.set(inner, total);
    return total;
  }
}

function isJinjaValue(value: unknown): value is JinjaValue {
  return typeof value === "object" && value !== null && "type" in value && "value" in value;
}

function itemCount(value: JinjaValue): number {
  const inner = value.value;
  if (typeof inner === "string" || Array.isArray(inner)) return inner.length;
  return inner instanceof Map ? inner.size : 0;
}

/** The characters and the values (objects, arrays, scalars) in plain inputs: messages, extras. */
function measureInputs(value: unknown, into = { chars: 0, values: 0 }): { chars: number; values: number } {
  into.values++;
  if (typeof value === "string") into.chars += value.length;
  else if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      into.chars += key.length;
      measureInputs(item, into);
    }
  }
  return into;
}

function overBudget(origin: ChatTemplateOrigin, limit: keyof ChatTemplateLimits, max: number, what: string): InferenceError {
  return new InferenceError(origin.code, `${origin.source}: the chat template ${what} (limit ${limit})`, {
    details: { source: origin.source, field: "chat_template", limit, max },
  });
}

// ---- The interpreter and its globals ----

type InterpreterClass = new (env: never) => JinjaInterpreter;
type BoundedInterpreterClass = new (env: unknown, budget: RenderBudget) => JinjaInterpreter;

const boundedClasses = new WeakMap<InterpreterClass, BoundedInterpreterClass>();

/**
 * The library's interpreter with every evaluation counted: `evaluate` is the
 * one method all statements and expressions go through (the interpreter calls
 * it recursively on `this`), so overriding it sees the whole render.
 */
function boundedInterpreter(Base: InterpreterClass): BoundedInterpreterClass {
  let Bounded = boundedClasses.get(Base);
  if (!Bounded) {
    const Library = Base as unknown as new (env: unknown) => {
      evaluate(node: JinjaNode | undefined, env: unknown): JinjaValue;
      evaluateArguments(args: JinjaNode[], env: unknown): [JinjaValue[], Map<string, JinjaValue>];
    };
    class BoundedInterpreter extends Library {
      constructor(
        env: unknown,
        private readonly budget: RenderBudget,
      ) {
        super(env);
      }

      override evaluate(node: JinjaNode | undefined, env: unknown): JinjaValue {
        const budget = this.budget;
        if (node?.type === "For") budget.loopSources.add(loopSource(node));
        if (node?.type === "FilterExpression") this.checkPadding(node as FilterNode, env);
        budget.enter();
        let value: JinjaValue;
        try {
          value = super.evaluate(node, env);
        } finally {
          budget.depth--;
        }
        if (node) budget.produced(node, value);
        return value;
      }

      /**
       * `indent(width)` and `tojson(indent=width)` build their padding before any value of theirs can be
       * checked: `'a\nb' | indent(300000000)` took seconds and 300 MB. Their width (times the lines, for
       * indent) is checked first; the arguments and the operand are evaluated an extra time for it.
       */
      private checkPadding(node: FilterNode, env: unknown): void {
        const { filter } = node;
        const name = filter.type === "CallExpression" ? filter.callee?.value : undefined;
        if ((name !== "indent" && name !== "tojson") || !filter.args) return;
        const [args, kwargs] = this.evaluateArguments(filter.args, env);
        const width = Number((name === "indent" ? (args[0] ?? kwargs.get("width")) : (kwargs.get("indent") ?? args[0]))?.value ?? 0);
        if (!(width > 0)) return;
        const operand = name === "indent" ? this.evaluate(node.operand, env).value : undefined;
        const lines = typeof operand === "string" ? operand.split("\n").length : 1;
        if (width * lines > this.budget.limits.maxChars) {
          const limit = this.budget.limits.maxChars;
          throw overBudget(this.budget.origin, "maxChars", limit, `builds a value of more than ${limit} characters`);
        }
      }
    }
    Bounded = BoundedInterpreter as unknown as BoundedInterpreterClass;
    boundedClasses.set(Base, Bounded);
  }
  return Bounded;
}

/** What a `for` node iterates: `for x in items if test` evaluates `items` (the select's left side). */
function loopSource(node: JinjaNode): object {
  const iterable = (node as JinjaNode & { iterable: JinjaNode & { lhs?: JinjaNode } }).iterable;
  return iterable.type === "SelectExpression" && iterable.lhs ? iterable.lhs : iterable;
}

/**
 * The globals Hugging Face's apply_chat_template provides (the library sets
 * the same ones inside `Template.render`, which this render replaces), with
 * `range` charged to the budget before it builds its list.
 */
function globals(budget: RenderBudget): Record<string, unknown> {
  return {
    true: true,
    false: false,
    none: null,
    True: true,
    False: false,
    None: null,
    raise_exception: (message: unknown) => {
      throw new Error(String(message));
    },
    range: (start: number, stop?: number, step = 1) => {
      if (stop === undefined) [start, stop] = [0, start];
      if (step === 0) throw new Error("range() step must not be zero");
      const count = Math.ceil((stop - start) / step);
      if (!(count > 0)) return [];
      budget.spend(count);
      return Array.from({ length: count }, (_, i) => start + i * step);
    },
    strftime_now: (format: string) => strftime(new Date(), format),
  };
}

const pad2 = (n: number) => String(n).padStart(2, "0");

/** Python's strftime for the directives chat templates use (dates in system prompts). */
function strftime(date: Date, format: string): string {
  return format.replace(/%[YmdbBHM%]/g, (directive) => {
    switch (directive) {
      case "%Y":
        return String(date.getFullYear());
      case "%m":
        return pad2(date.getMonth() + 1);
      case "%d":
        return pad2(date.getDate());
      case "%b":
        return date.toLocaleString(undefined, { month: "short" });
      case "%B":
        return date.toLocaleString(undefined, { month: "long" });
      case "%H":
        return pad2(date.getHours());
      case "%M":
        return pad2(date.getMinutes());
      default:
        return "%";
    }
  });
}

// ---- Nesting of the template text ----

/** Statements that open a block closed by an `end...` statement (`set` only in its block form, without `=`). */
const BLOCK_OPENERS = new Set(["if", "for", "macro", "call", "filter", "set"]);

/**
 * How deeply the parser would recurse on `tokens`: open blocks, plus within
 * a tag its open brackets and its chains of unary operators and ternaries
 * (`not not ...`, `a if b else c if ...`). Stops counting past `limit`.
 */
function templateNesting(tokens: readonly JinjaToken[], limit: number): number {
  let blocks = 0;
  let inTag = 0; // brackets, unary operators and ternaries of the current tag
  let deepest = 0;
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    switch (token.type) {
      case "OpenStatement": {
        const name = tokens[i + 1]?.value ?? "";
        if (BLOCK_OPENERS.has(name) && (name !== "set" || !assignsInline(tokens, i + 1))) blocks++;
        else if (name.startsWith("end")) blocks--;
        inTag = 0;
        break;
      }
      case "OpenExpression":
        inTag = 0;
        break;
      case "OpenParen":
      case "OpenSquareBracket":
      case "OpenCurlyBracket":
      case "UnaryOperator":
        inTag++;
        break;
      case "CloseParen":
      case "CloseSquareBracket":
      case "CloseCurlyBracket":
        inTag--;
        break;
      case "Identifier":
        if (token.value === "not" || token.value === "if") inTag++;
        break;
    }
    deepest = Math.max(deepest, blocks + inTag);
    if (deepest > limit) break;
  }
  return deepest;
}

/** Whether the `set` statement starting at `from` assigns with `=` before its `%}` (so opens no block). */
function assignsInline(tokens: readonly JinjaToken[], from: number): boolean {
  for (let i = from; i < tokens.length && tokens[i]!.type !== "CloseStatement"; i++) {
    if (tokens[i]!.type === "Equals") return true;
  }
  return false;
}
