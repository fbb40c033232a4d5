/* jsmn (Debian libjsmn-dev 1.1.0), the JSON tokenizer of the library: declarations
 * only; jsmn.c compiles its definitions once, with the same options. It allocates nothing and
 * returns offsets into the caller's buffer, so a secret is decoded straight from our wiped input.
 *
 * The options are set here, once, for both sides (they change jsmntok_t's layout):
 * - JSMN_STRICT: primitives must be true, false, null or start like a number; keys are strings.
 * - JSMN_PARENT_LINKS: each token records its parent, so a ',' or a closing bracket finds its
 *   container in one step (or, for a bracket, a walk up at most as long as the nesting is deep,
 *   which JSONText bounds before jsmn runs). Without it jsmn scans back over every earlier token
 *   at each of them: `{"a":0,"a":0,…}` of 0.5 MB took seconds (docs/security.md, "A planted oversized item"). */
#ifndef PORTAL_CJSMN_H
#define PORTAL_CJSMN_H
#ifndef PORTAL_CJSMN_DEFINITIONS
#define JSMN_HEADER
#endif
#define JSMN_STRICT
#define JSMN_PARENT_LINKS
#include <jsmn.h>
#endif
