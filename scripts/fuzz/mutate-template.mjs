// Chat template mutations: Jinja snippets that loop for long, recurse, build huge strings, raise, or do not
// parse, spliced into a valid template; plus cuts and duplications of the template's own text.

export const SEED_TEMPLATE =
  "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";

const SNIPPETS = [
  "{% for i in range(1000000000) %}x{% endfor %}",
  "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
  "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
  "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
  "{{ 'x' * 1000000000 }}",
  "{% set s = 'ab' %}{% for i in range(64) %}{% set s = s + s %}{% endfor %}{{ s }}",
  "{{ raise_exception('fuzz') }}",
  "{{ messages[1000000].content }}",
  "{{ messages[-1000000] }}",
  "{{ none.attribute.deeper }}",
  "{{ undefined_function() }}",
  "{{ messages | unknown_filter }}",
  "{{ 1 / 0 }}",
  "{{ 10 ** 10000 }}",
  "{{ messages[0]['content'][::-1] }}",
  "{% set ns = namespace(x=1) %}{% for m in messages %}{% set ns.x = ns.x * 1000000000 %}{% endfor %}{{ ns.x }}",
  "{{ messages | tojson(indent=1000000000) }}",
  "{{ '%s' % 1 }}",
  "{{",
  "{%",
  "{% if %}",
  "{% for %}",
  "{% endfor %}",
  "{% if true %}",
  "{{ }}",
  "{# unclosed comment",
  "{% raw %}",
  "}}{{",
  "{{ messages[",
  "{{ 'unterminated }}",
  "{{ (((((((((((((((((((((((((((((((((((( 1 }}",
  "\u0000",
  "\ud800",
];

const nestedIf = (depth) => "{% if true %}".repeat(depth) + "x" + "{% endif %}".repeat(depth);
const nestedParens = (depth) => "{{ " + "(".repeat(depth) + "1" + ")".repeat(depth) + " }}";

export function mutateTemplate(r, seed) {
  const at = r.int(seed.length + 1);
  const splice = (text) => seed.slice(0, at) + text + seed.slice(at);
  const choice = r.weighted([[6, "snippet"], [1, "nest"], [2, "cut"], [1, "duplicate"], [1, "replace"]]);
  if (choice === "snippet") {
    const index = r.int(SNIPPETS.length);
    return { text: splice(SNIPPETS[index]), tags: [`template.snippet#${index}`] };
  }
  if (choice === "nest") {
    const depth = r.pick([100, 10000, 100000]);
    const deep = r.chance(0.5) ? nestedIf(depth) : nestedParens(depth);
    return { text: splice(deep), tags: [`template.nest x${depth}`] };
  }
  const end = at + r.int(seed.length - at + 1);
  if (choice === "cut") return { text: seed.slice(0, at) + seed.slice(end), tags: ["template.cut"] };
  if (choice === "duplicate") return { text: splice(seed.slice(at, end)), tags: ["template.duplicate"] };
  return { text: seed.slice(0, at) + r.pick(["{", "}", "%", "'", "\"", "[", "(", "|", ".", " "]) + seed.slice(at + 1), tags: ["template.replace"] };
}
