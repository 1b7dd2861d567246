import { randomUUID } from "node:crypto";

// Exact JSON: the daemon's answers carry record values a JavaScript number
// cannot always hold (a 64-bit id past 2^53, a decimal such as 1234.50
// whose digits matter). parseExact keeps such numbers exactly: an integer
// beyond Number.MAX_SAFE_INTEGER becomes a bigint, a decimal whose text a
// double does not reproduce stays its text (a string); every other number
// is a plain number. stringifyExact writes a bigint as its digits.

/** A JSON value as parseExact returns it. */
export type JsonValue = null | boolean | number | bigint | string | JsonValue[] | { [key: string]: JsonValue };

/** A JSON object as parseExact returns it. */
export type JsonObject = { [key: string]: JsonValue };

const MAX_DEPTH = 512;

/** Parses JSON text keeping every number exact (see the module comment). */
export function parseExact(text: string): JsonValue {
  const p = new Parser(text);
  p.space();
  const v = p.value(0);
  p.space();
  if (p.i !== text.length) {
    throw p.fail("unexpected text after the value");
  }
  return v;
}

class Parser {
  i = 0;
  constructor(readonly s: string) {}

  fail(why: string): SyntaxError {
    return new SyntaxError(`JSON at offset ${this.i}: ${why}`);
  }

  space(): void {
    while (this.i < this.s.length && " \t\n\r".includes(this.s[this.i])) {
      this.i++;
    }
  }

  value(depth: number): JsonValue {
    if (depth > MAX_DEPTH) {
      throw this.fail(`nested deeper than ${MAX_DEPTH}`);
    }
    const c = this.s[this.i];
    switch (c) {
      case "{":
        return this.object(depth);
      case "[":
        return this.array(depth);
      case '"':
        return this.string();
      case "t":
        return this.word("true", true);
      case "f":
        return this.word("false", false);
      case "n":
        return this.word("null", null);
      default:
        return this.number();
    }
  }

  word<T>(w: string, v: T): T {
    if (this.s.startsWith(w, this.i)) {
      this.i += w.length;
      return v;
    }
    throw this.fail("unexpected character");
  }

  object(depth: number): JsonObject {
    const out: JsonObject = {};
    this.i++;
    this.space();
    if (this.s[this.i] === "}") {
      this.i++;
      return out;
    }
    for (;;) {
      this.space();
      if (this.s[this.i] !== '"') {
        throw this.fail("expected a key");
      }
      const k = this.string();
      this.space();
      if (this.s[this.i++] !== ":") {
        throw this.fail("expected ':'");
      }
      this.space();
      // A duplicate key is refused: two readers could see two values.
      if (Object.prototype.hasOwnProperty.call(out, k)) {
        throw this.fail(`duplicate key ${JSON.stringify(k)}`);
      }
      Object.defineProperty(out, k, { value: this.value(depth + 1), enumerable: true, writable: true, configurable: true });
      this.space();
      const c = this.s[this.i++];
      if (c === "}") {
        return out;
      }
      if (c !== ",") {
        throw this.fail("expected ',' or '}'");
      }
    }
  }

  array(depth: number): JsonValue[] {
    const out: JsonValue[] = [];
    this.i++;
    this.space();
    if (this.s[this.i] === "]") {
      this.i++;
      return out;
    }
    for (;;) {
      this.space();
      out.push(this.value(depth + 1));
      this.space();
      const c = this.s[this.i++];
      if (c === "]") {
        return out;
      }
      if (c !== ",") {
        throw this.fail("expected ',' or ']'");
      }
    }
  }

  string(): string {
    const start = this.i;
    this.i++;
    let simple = true;
    while (this.i < this.s.length) {
      const c = this.s[this.i];
      if (c === '"') {
        this.i++;
        const raw = this.s.slice(start, this.i);
        return simple ? raw.slice(1, -1) : (JSON.parse(raw) as string);
      }
      if (c === "\\") {
        simple = false;
        this.i += 2;
        continue;
      }
      if (c < " ") {
        throw this.fail("control character in a string");
      }
      this.i++;
    }
    throw this.fail("unterminated string");
  }

  number(): number | bigint | string {
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(this.s.slice(this.i, this.i + 4096));
    if (!m) {
      throw this.fail("unexpected character");
    }
    this.i += m[0].length;
    return exactNumber(m[0], !m[2] && !m[3]);
  }
}

/** The exact value of a JSON number's text (see the module comment). */
export function exactNumber(text: string, integral: boolean): number | bigint | string {
  const n = Number(text);
  if (integral) {
    return Number.isSafeInteger(n) ? n : BigInt(text);
  }
  // A double that prints back as the same text holds it exactly enough to
  // round-trip; anything else (1234.50, 0.1000000000000000055) keeps its
  // digits as text.
  return String(n) === text ? n : text;
}

/** JSON text of v, with a bigint written as its digits. */
export function stringifyExact(v: unknown): string {
  const marks: string[] = [];
  // A tag no string of v can hold by chance: a fresh random one per call.
  const tag = `bigint-${randomUUID()}-`;
  const text = JSON.stringify(v, (_k, x) => {
    if (typeof x === "bigint") {
      marks.push(x.toString());
      return tag + (marks.length - 1);
    }
    return x;
  });
  if (marks.length === 0) {
    return text;
  }
  return text.replace(new RegExp(`"${tag}(\\d+)"`, "g"), (_m, i: string) => marks[Number(i)]);
}
