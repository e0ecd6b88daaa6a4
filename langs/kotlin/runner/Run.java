package kiln;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.jetbrains.kotlin.cli.common.arguments.K2JVMCompilerArguments;
import org.jetbrains.kotlin.cli.common.messages.MessageCollector;
import org.jetbrains.kotlin.cli.jvm.K2JVMCompiler;
import org.jetbrains.kotlin.config.Services;
import org.jetbrains.kotlin.progress.CompilationCanceledException;
import org.jetbrains.kotlin.progress.CompilationCanceledStatus;

/**
 * kiln's Kotlin launcher: `kotlinc <args>` then `kotlin solution.CheckerKt`, in one JVM.
 *
 * <p>Usage: {@code java -cp gson.jar:runner/run.jar:<kotlin>/lib/kotlin-compiler.jar:check kiln.Run
 * <main class> <kotlinc args...>}. The compiler's own entry point (K2JVMCompiler.main: same
 * diagnostics on stderr, exits with its status on failure) runs in-process; the main class is then
 * loaded by the application class loader from the class path, where the compiler's output folder
 * and kotlin-stdlib (from kotlin-compiler.jar's manifest) are, as `kotlin -cp gson.jar:check
 * solution.CheckerKt` would run it, one JVM start cheaper. An exception escaping main is reported
 * as the java launcher reports it (its stack trace without this class's frames), status 1.
 *
 * <p>{@code kiln.Run --prestarted <main class> <kotlinc args...>} (Makefile {@code prestart}):
 * the same, once kiln's go byte has come on descriptor 3; until then the compiler warms up on
 * runner/warmup. Built against kotlin-compiler.jar for that; test's path does not touch it.
 *
 * <p>Install time only: {@code -Dkiln.classes=DIR} loads the main class from DIR instead, so the
 * class data sharing archive can be dumped with a class path that has no folder on it.
 */
public final class Run {
    private static final String COMPILER = "org.jetbrains.kotlin.cli.jvm.K2JVMCompiler";

    private Run() {}

    public static void main(String[] args) throws Throwable {
        if (args[0].equals("--prestarted")) {
            args = Arrays.copyOfRange(args, 1, args.length);
            warmUntilGo(args);
            // the JVM's own record of its command, as test's reads (/proc/self/cmdline still says it)
            System.setProperty("sun.java.command", System.getProperty("sun.java.command", "").replace(" --prestarted ", " "));
        }
        String mainClass = args[0];
        Method kotlinc = Class.forName(COMPILER).getMethod("main", String[].class);
        try {
            kotlinc.invoke(null, (Object) Arrays.copyOfRange(args, 1, args.length));
        } catch (InvocationTargetException e) {
            throw e.getCause(); // a compiler crash: its own trace, status 1
        }
        ClassLoader loader = Run.class.getClassLoader();
        String classes = System.getProperty("kiln.classes");
        if (classes != null) {
            loader = new URLClassLoader(new URL[] {Paths.get(classes).toUri().toURL()}, loader);
        }
        Method main = findMain(mainClass, loader);
        Throwable thrown;
        try {
            main.invoke(null, (Object) new String[0]);
            return;
        } catch (InvocationTargetException e) {
            thrown = e.getCause();
        } catch (ExceptionInInitializerError e) { // the class's static initialiser failed
            thrown = e;
            e.setStackTrace(new StackTraceElement[0]); // as the launcher shows it: no frames
        }
        trim(thrown, Collections.newSetFromMap(new IdentityHashMap<>()));
        throw thrown;
    }

    private static Method findMain(String name, ClassLoader loader) {
        Class<?> type;
        try {
            type = Class.forName(name, false, loader);
        } catch (ClassNotFoundException | LinkageError e) {
            System.err.println("Error: Could not find or load main class " + name);
            System.err.println("Caused by: " + e);
            System.exit(1);
            return null;
        }
        try {
            Method main = type.getMethod("main", String[].class);
            if (Modifier.isStatic(main.getModifiers()) && main.getReturnType() == void.class) {
                main.setAccessible(true);
                return main;
            }
        } catch (NoSuchMethodException e) {
            // reported below
        }
        System.err.println("Error: Main method not found in class " + name + ", please define the main method as:");
        System.err.println("   public static void main(String[] args)");
        System.err.println("or a JavaFX application class must extend javafx.application.Application");
        System.exit(1);
        return null;
    }

    /** Drops this launcher's frames (Run.main and the reflection below the checker's main). */
    private static void trim(Throwable t, Set<Throwable> seen) {
        if (t == null || !seen.add(t)) {
            return;
        }
        StackTraceElement[] frames = t.getStackTrace();
        int end = frames.length;
        while (end > 0 && !isLauncherMain(frames[end - 1])) {
            end--;
        }
        if (end > 0) {
            end--;
            while (end > 0 && isReflection(frames[end - 1])) {
                end--;
            }
            t.setStackTrace(Arrays.copyOf(frames, end));
        }
        trim(t.getCause(), seen);
        for (Throwable suppressed : t.getSuppressed()) {
            trim(suppressed, seen);
        }
    }

    private static boolean isLauncherMain(StackTraceElement frame) {
        return frame.getClassName().equals(Run.class.getName()) && frame.getMethodName().equals("main");
    }

    private static boolean isReflection(StackTraceElement frame) {
        String name = frame.getClassName();
        return name.startsWith("jdk.internal.reflect.") || name.equals("java.lang.reflect.Method");
    }

    // -- prestart (Makefile `prestart`) ---------------------------------------------------------

    /**
     * Compiles of runner/warmup before the go. One loads the compiler and most of its hot paths;
     * a second took ~1.5-3 s more CPU per slot for 0-0.2 s less after the go (within the noise
     * of a second sitting): not worth it.
     */
    private static final int WARM_COMPILES = 1;

    /**
     * The compiler's application environment (its file systems and extension points) outlives a
     * compile while this property says so; the warm-up's is kept for the run's compile, which
     * then disposes of it as test's does (the property is cleared before the go).
     */
    private static final String KEEPALIVE = "kotlin.environment.keepalive";

    /** The go came: the warm-up stops at the compiler's next check for cancellation. */
    private static volatile boolean released;

    /**
     * Started ahead of the request: the compiler warms on runner/warmup, on a thread of its own
     * so that the go is seen at once, until kiln's byte on descriptor 3 (written once the
     * request's files are in place). A go during the warm-up cancels it at the compiler's next
     * check: a run never waits for warming it did not need. Returns with nothing of the warm-up
     * left but the kept environment (its thread ended, its folder removed, its classes in a
     * loader of their own, unreachable, the property cleared). End-of-file without the byte: the
     * slot was closed unused.
     */
    private static void warmUntilGo(String[] args) throws Exception {
        Thread warm = new Thread(() -> warm(args), "kiln-warmup");
        warm.start();
        int go;
        try (FileInputStream in = new FileInputStream("/proc/self/fd/3")) {
            go = in.read();
        }
        released = true;
        if (go < 0) {
            Runtime.getRuntime().halt(0);
        }
        warm.join();
    }

    private static void warm(String[] args) {
        Path out = null;
        System.setProperty(KEEPALIVE, "true");
        try {
            out = Files.createTempDirectory("kiln-warmup"); // /tmp: never in the request's folder
            for (int i = 0; i < WARM_COMPILES && !released; i++) {
                compile(args, out);
                if (!released) {
                    runQuietly(args[0], out);
                }
            }
        } catch (Throwable e) { // failed: the go finds a colder compiler, nothing else
        } finally {
            System.clearProperty(KEEPALIVE);
            if (out != null) {
                delete(out);
            }
        }
    }

    /** The compiler on runner/warmup/*.kt with the run's options but its own -d, its messages dropped. */
    private static void compile(String[] args, Path out) throws IOException {
        List<String> options = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            if (args[i].equals("-d")) {
                i++;
            } else if (!args[i].endsWith(".kt")) {
                options.add(args[i]);
            }
        }
        options.add("-d");
        options.add(out.toString());
        try (Stream<Path> sources = Files.list(Paths.get("runner/warmup"))) {
            sources.map(Path::toString).filter(p -> p.endsWith(".kt")).sorted().forEach(options::add);
        }
        K2JVMCompiler compiler = new K2JVMCompiler();
        K2JVMCompilerArguments arguments = compiler.createArguments();
        compiler.parseArguments(options.toArray(new String[0]), arguments);
        CompilationCanceledStatus cancel = () -> {
            if (released) {
                throw new CompilationCanceledException();
            }
        };
        // a cancelled compile returns (ExitCode.OK, its message to the dropped collector)
        compiler.exec(MessageCollector.Companion.getNONE(), new Services.Builder().register(CompilationCanceledStatus.class, cancel).build(), arguments);
    }

    /** The warm-up's checker (gson, kotlin-stdlib, formatting warmed too), loaded by a throwaway loader, its output dropped. */
    private static void runQuietly(String mainClass, Path classes) throws Exception {
        PrintStream out = System.out;
        try (URLClassLoader loader = new URLClassLoader(new URL[] {classes.toUri().toURL()}, Run.class.getClassLoader())) {
            System.setOut(new PrintStream(OutputStream.nullOutputStream()));
            Class.forName(mainClass, true, loader).getMethod("main", String[].class).invoke(null, (Object) new String[0]);
        } finally {
            System.setOut(out);
        }
    }

    private static void delete(Path folder) {
        try (Stream<Path> all = Files.walk(folder)) {
            all.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException e) {
            // the slot's own /tmp: what is left dies with it
        }
    }
}
