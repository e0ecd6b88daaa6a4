package kiln;

import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * kiln's judge build for Kotlin: the compiler, then the class to run found in what it made, as
 * Kattis and Codeforces run a Kotlin submission whatever its file is called; a build that leaves
 * no class to run is a compile error.
 *
 * <p>Usage: {@code java -cp <the compiler's class path> kiln.Build <dir> <kotlinc args...>}. The
 * compiler's own entry point (K2JVMCompiler.main: its words on stderr, its status on failure) runs
 * in-process. The class run is then, among the top-level classes it wrote below {@code <dir>}, the
 * judge file's (Main.kt's {@code MainKt}, top-level {@code fun main}) if it has a {@code public
 * static void main(String[])}, else the first by name that has one (an {@code object} with
 * {@code @JvmStatic fun main}, a file's {@code @JvmName}); its name goes to {@code
 * <dir>/.main-class}, an argument file the exec command gives the java launcher. None: kiln's
 * words on stderr, status 1.
 */
public final class Build {
    static final String JUDGE_CLASS = "MainKt";
    static final String MAIN_CLASS_FILE = ".main-class";
    private static final String COMPILER = "org.jetbrains.kotlin.cli.jvm.K2JVMCompiler";

    private Build() {}

    public static void main(String[] args) throws Throwable {
        Path dir = Paths.get(args[0]);
        Method kotlinc = Class.forName(COMPILER).getMethod("main", String[].class);
        try {
            kotlinc.invoke(null, (Object) Arrays.copyOfRange(args, 1, args.length));
        } catch (InvocationTargetException e) {
            throw e.getCause(); // a compiler crash: its own trace, status 1
        }
        List<String> classes;
        try (Stream<Path> files = Files.walk(dir)) {
            classes = files.map(p -> dir.relativize(p).toString())
                    .filter(p -> p.endsWith(".class") && !p.contains("$"))
                    .map(p -> p.substring(0, p.length() - ".class".length()).replace('/', '.'))
                    .sorted(Comparator.comparing((String name) -> !isJudgeClass(name)).thenComparing(Comparator.naturalOrder()))
                    .collect(Collectors.toList());
        }
        try (URLClassLoader loader = new URLClassLoader(new URL[] {dir.toUri().toURL()}, Build.class.getClassLoader())) {
            for (String name : classes) {
                if (hasMain(name, loader)) {
                    Files.write(dir.resolve(MAIN_CLASS_FILE), (name + "\n").getBytes(StandardCharsets.UTF_8));
                    return;
                }
            }
        }
        System.err.println("kiln: the build made no program to run: no main function (a top-level `fun main()`, or `@JvmStatic fun main(args: Array<String>)` in an object)");
        System.exit(1);
    }

    private static boolean isJudgeClass(String name) {
        return name.equals(JUDGE_CLASS) || name.endsWith("." + JUDGE_CLASS);
    }

    private static boolean hasMain(String name, ClassLoader loader) {
        try {
            Method main = Class.forName(name, false, loader).getMethod("main", String[].class);
            return Modifier.isStatic(main.getModifiers()) && main.getReturnType() == void.class;
        } catch (ClassNotFoundException | LinkageError | NoSuchMethodException e) {
            return false;
        }
    }
}
