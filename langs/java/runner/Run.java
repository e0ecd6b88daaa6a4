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
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

/**
 * kiln's Java launcher: `javac <args>` then `java solution.Checker`, in one JVM.
 *
 * <p>Usage: {@code java -cp gson.jar:runner/run.jar:check kiln.Run <main class> <javac args...>}.
 * javac runs in-process (same compiler, same diagnostics on stderr, same exit status on failure);
 * the main class is then loaded by the application class loader from the class path (the javac
 * output folder is on it), so the checker runs as `java -cp gson.jar:check solution.Checker`
 * would, one JVM start (~100 ms) cheaper. An exception escaping main is reported as the java
 * launcher reports it (its stack trace without this class's frames), status 1.
 *
 * <p>Install time only: {@code -Dkiln.classes=DIR} loads the main class from DIR instead, so the
 * class data sharing archive can be dumped with a class path that has no folder on it.
 */
public final class Run {
    private Run() {}

    public static void main(String[] args) throws Throwable {
        String mainClass = args[0];
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        int status = javac.run(null, null, null, Arrays.copyOfRange(args, 1, args.length));
        if (status != 0) {
            System.exit(status);
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
                main.setAccessible(true); // a public main of a non-public class
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
        if (end > 0) { // the trace reaches Run.main: cut it and the reflective call before it
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
