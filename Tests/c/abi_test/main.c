/*
 * abi_test — exercises every function of Include/portal_keyring.h through libportal-keyring.so
 * against a real (private) Secret Service. One program of several files, one area each (the test
 * cases in abi_test.h by file); Tests/c/build.sh abi_test builds them together.
 *
 * Run it inside scripts/with-keyring.sh (Tests/c/run.sh builds and runs it):
 *
 *   PORTAL_TEST_KEYRINGCTL=build/c/keyringctl scripts/with-keyring.sh build/c/abi_test
 *
 * It stores, locks and unlocks items in the keyring that with-keyring.sh created; it refuses to
 * run without PORTAL_TEST_KEYRING_DIR (i.e. outside the harness). keyringctl
 * (Tests/tools/keyringctl.c, path in PORTAL_TEST_KEYRINGCTL) stores raw items and inspects the
 * keyring independently of the library. Each test case uses its own auth environment id.
 *
 * Every failed CHECK prints file:line, the test case, the condition and the thread's last error
 * message, and the test goes on: one run reports every failed check. At the end a summary line
 * gives the number of checks passed and failed, and the exit status is 1 if any failed (a crash
 * on the state a failed check left behind also fails the run: Tests/c/run.sh checks the exit
 * status and the summary line). PORTAL_ABI_TEST_STOP_AT_FIRST=1 stops instead
 * (exit 1 at the first failed check), for stepping through one failure in a debugger.
 *
 * Internal mode: `abi_test --no-bus-child FD ADDRESS|-` is the child process of the no-bus test
 * (the library caches its bus connection, so a fresh process is needed); it reports its number
 * of checks on FD.
 */
#include "abi_test.h"

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *stop = getenv("PORTAL_ABI_TEST_STOP_AT_FIRST");
    check_stop_at_first = stop && strcmp(stop, "1") == 0;
    if (argc == 3 && strcmp(argv[1], "--no-bus-child") == 0) return no_bus_child(atoi(argv[2]));
    if (argc != 1) {
        fprintf(stderr, "usage: abi_test   (inside scripts/with-keyring.sh, with PORTAL_TEST_KEYRINGCTL set)\n");
        return 2;
    }
    if ((!getenv("PORTAL_TEST_KEYRING_DIR") && !provider_is("flatpak")) || !getenv("DBUS_SESSION_BUS_ADDRESS")) {
        fprintf(stderr, "abi_test: run me inside scripts/with-keyring.sh (it stores, locks and deletes "
                        "keyring items)\n");
        return 2;
    }
    keyringctl_path();
    atexit(unlock_at_exit);

    test_versions();
    test_status_str();
    test_async_arguments();
    test_free_null();
    test_last_error();
    test_auth_new_arguments();
    test_timeouts();
    test_null_arguments();
    test_totp_step_accessors();
    test_persist_arguments();
    test_round_trip();
    test_clear();
    test_shared_and_independent();
    test_stored_format();
    test_unusable_items();
    test_foreign_items();
    test_locked();
    test_restart();
    test_threads();
    test_no_bus();
    test_session_invalidate();
    test_api_key_portal();
    test_portal_requests();
    test_portal_validation_401();
    test_portal_clear_and_network();
    test_sign_in_arguments();
    test_double_free();
    /* Last: these found library bugs (see the report); a failure must not hide other results. */
    test_portal_arguments();
    test_embedded_nul();

    if (failures) {
        printf("abi_test: %d checks passed, %d FAILED (every failed check is listed above)\n", checks - failures,
               failures);
        return 1;
    }
    printf("abi_test: all %d checks passed\n", checks);
    return 0;
}
