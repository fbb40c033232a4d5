/* The one copy of jsmn's definitions (jsmn.h without JSMN_HEADER defines them), strict mode:
 * primitives must be true, false, null or start like a number, and object keys are strings.
 * What jsmn still lets through (trailing commas, several top-level values, number and literal
 * spelling, control characters and UTF-8 in strings) is refused by JSONText.swift. */
#define JSMN_STRICT
#include <jsmn.h>
