/* The C `main` of every checker kiln builds, compiled once by install.sh into boot/main.o and
 * linked with `-no-hs-main`. GHC would otherwise write this same stub on every link and compile
 * it with gcc, whose parse of <Rts.h> alone costs about a third of a second per request.
 *
 * It matches GHC 9.0's own stub for a program linked without -rtsopts: only the "safe" RTS
 * flags are accepted on the command line, and `:Main.main` is the program (the module chosen
 * with -main-is, else Main). */
#include <Rts.h>

extern StgClosure ZCMain_main_closure;

int main(int argc, char *argv[])
{
    RtsConfig config = defaultRtsConfig;
    config.rts_opts_enabled = RtsOptsSafeOnly;
    config.rts_opts_suggestions = true;
    config.keep_cafs = false;
    config.rts_hs_main = true;
    return hs_main(argc, argv, &ZCMain_main_closure, config);
}
