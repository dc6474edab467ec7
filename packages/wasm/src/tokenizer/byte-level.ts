/**
 * GPT-2's byte-level alphabet: every byte gets a printable stand-in character
 * so byte-level BPE vocabularies can be stored as text. Printable Latin-1
 * bytes stand for themselves; the rest map to U+0100 onwards in byte order
 * (so the space 0x20 becomes "Ġ" U+0120 and "\n" becomes "Ċ").
 */
function buildByteToChar(): string[] {
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const table: string[] = new Array<string>(256);
  let next = 0;
  for (let b = 0; b < 256; b++) {
    table[b] = String.fromCodePoint(printable(b) ? b : 256 + next++);
  }
  return table;
}

export const BYTE_TO_CHAR: readonly string[] = buildByteToChar();

export const CHAR_TO_BYTE: ReadonlyMap<string, number> = new Map(BYTE_TO_CHAR.map((ch, byte) => [ch, byte]));

const utf8 = new TextEncoder();

/** UTF-8 bytes of `text`, each written as its byte-level stand-in character. */
export function toByteLevel(text: string): string {
  let out = "";
  for (const byte of utf8.encode(text)) out += BYTE_TO_CHAR[byte];
  return out;
}

/**
 * The bytes a byte-level token stands for. Characters outside the alphabet
 * (possible in hand-made vocabularies) contribute their own UTF-8 bytes.
 */
export function fromByteLevel(token: string): Uint8Array {
  const bytes: number[] = [];
  for (const ch of token) {
    const byte = CHAR_TO_BYTE.get(ch);
    if (byte !== undefined) bytes.push(byte);
    else bytes.push(...utf8.encode(ch));
  }
  return Uint8Array.from(bytes);
}
