package kiln;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;

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
 * <p>Install time only: {@code -Dkiln.classes=DIR} loads the main class from DIR instead, so the
 * class data sharing archive can be dumped with a class path that has no folder on it.
 */
public final class Run {
    private static final String COMPILER = "org.jetbrains.kotlin.cli.jvm.K2JVMCompiler";

    private Run() {}

    public static void main(String[] args) throws Throwable {
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
}
