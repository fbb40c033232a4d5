/*
 * fault_test — the in-process conditions of the fault-injection suite (Tests/fault/run.sh),
 * against libportal-keyring.so and a real gnome-keyring-daemon on a private bus
 * (scripts/with-keyring.sh). keyringctl (PORTAL_TEST_KEYRINGCTL) and secret-tool write and
 * inspect the keyring independently of the library.
 *
 *   fault_test absent-secret   5: an item locked (or deleted) between the search and GetSecrets
 *   fault_test locked-app      6: restore while locked + the app's usual error handling
 *   fault_test lookalike       9: other applications' look-alike items
 *   fault_test tokens         10: token bytes: round trip or explicit rejection
 *   fault_test threads N      11: 16 threads, first call at once, N rounds each
 *   fault_test churn ENV N ID 11: one process of the 8-process run
 *   fault_test memory ENV A B 12: marker token, A then B restore+free rounds, pausing for gcore
 *   fault_test bad-input      13: every entry point with NULL, "", invalid UTF-8, 1 MiB
 *   fault_test reentry        14: callbacks that call back into the library
 *
 * Output: "ok ..." per passed check, "FAIL ..." per failed one, "time ..." for measurements;
 * exit status 1 if any check failed. A watchdog (SIGALRM) turns a hang into a failure.
 *
 * Fault injection for condition 5: this program defines secret_item_load_secrets_sync, which the
 * library finds with dlsym (linked with -rdynamic; the library does not link libsecret). When armed
 * it runs "keyringctl lock" (or deletes the items) right before the library's GetSecrets, i.e.
 * exactly between its search and GetSecrets. Forwarded to libsecret's only where some other part
 * of the process loaded it.
 */
#include "fault_test.h"

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    check_verbose = 1;
    if (argc < 2) {
        fprintf(stderr, "usage: fault_test CONDITION [ARGS]\n");
        return 2;
    }
    const char *what = argv[1];
    if (strcmp(what, "absent-secret") == 0) {
        watchdog(60);
        test_absent_secret();
    } else if (strcmp(what, "locked-app") == 0) {
        watchdog(60);
        test_locked_app();
    } else if (strcmp(what, "lookalike") == 0) {
        watchdog(60);
        test_lookalike();
    } else if (strcmp(what, "tokens") == 0) {
        watchdog(60);
        test_tokens();
    } else if (strcmp(what, "threads") == 0 && argc == 3) {
        watchdog(600);
        test_threads(atoi(argv[2]));
    } else if (strcmp(what, "churn") == 0 && argc == 5) {
        check_context = "11 processes";
        watchdog(600);
        churn(argv[2], atoi(argv[4]), atoi(argv[3]));
        printf("CHURN sessions=%ld signed_out=%ld storage=%ld other=%ld mixes=%ld\n", sessions_seen, signed_out_seen,
               storage_errors, other_errors, mixes);
        return 0;
    } else if (strcmp(what, "memory") == 0 && argc == 5) {
        watchdog(300);
        test_memory(argv[2], atoi(argv[3]), atoi(argv[4]));
    } else if (strcmp(what, "bad-input") == 0) {
        watchdog(60);
        test_bad_input();
    } else if (strcmp(what, "reentry") == 0) {
        watchdog(60);
        test_reentry();
    } else {
        fprintf(stderr, "fault_test: unknown condition %s\n", what);
        return 2;
    }
    return failures ? 1 : 0;
}
