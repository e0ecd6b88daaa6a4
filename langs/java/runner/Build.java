package kiln;

import com.sun.source.tree.ClassTree;
import com.sun.source.tree.CompilationUnitTree;
import com.sun.source.tree.MethodTree;
import com.sun.source.tree.Tree;
import com.sun.source.util.JavacTask;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.tools.JavaCompiler;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;

/**
 * kiln's judge build for Java: the class to run is named by the source, as Kattis, DMOJ,
 * Codeforces and DOMjudge name it, and a build that leaves no class to run is a compile error.
 *
 * <p>Usage: {@code java -cp gson.jar:runner/run.jar kiln.Build <dir> <javac args...>}. The
 * submission is {@code <dir>/Main.java}, its other files beside it. Its top-level public class (or,
 * without one, its first top-level class declaring {@code main}; else {@code Main}) is the class
 * run: the file is renamed after a public class first (javac wants {@code public class X} in
 * {@code X.java}). Then javac, in-process, on every {@code <dir>/*.java} with the given arguments
 * (its words on stderr, its status). Then the class is loaded (not initialised) to see it has
 * {@code public static void main(String[])}; without one, kiln's words on stderr and status 1.
 * Last, {@code <dir>/.main-class} holds the class's name, an argument file the exec command gives
 * the java launcher ({@code java ... @judge/.main-class}); a submission cannot name a file so
 * (kiln's names start with a letter, a digit or {@code _}).
 */
public final class Build {
    static final String JUDGE_FILE = "Main.java";
    static final String DEFAULT_CLASS = "Main";
    static final String MAIN_CLASS_FILE = ".main-class";

    private Build() {}

    public static void main(String[] args) throws IOException {
        Path dir = Paths.get(args[0]);
        List<String> javacArgs = new ArrayList<>(Arrays.asList(args).subList(1, args.length));
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        Path judgeFile = dir.resolve(JUDGE_FILE);
        String[] named = named(javac, judgeFile); // {package, public class, class with main}
        String simple = named[1] != null ? named[1] : named[2] != null ? named[2] : DEFAULT_CLASS;
        String runClass = named[0].isEmpty() ? simple : named[0] + "." + simple;
        if (named[1] != null && !named[1].equals(DEFAULT_CLASS)) {
            Path renamed = dir.resolve(named[1] + ".java");
            if (Files.exists(renamed)) {
                System.err.println("kiln: " + JUDGE_FILE + " declares public class " + named[1] + ", and " + renamed.getFileName() + " is another file of the submission");
                System.exit(1);
            }
            Files.move(judgeFile, renamed);
        }
        List<String> sources;
        try (Stream<Path> files = Files.list(dir)) {
            sources = files.map(Path::toString).filter(p -> p.endsWith(".java")).sorted().collect(Collectors.toList());
        }
        javacArgs.addAll(sources);
        int status = javac.run(null, null, null, javacArgs.toArray(new String[0]));
        if (status != 0) {
            System.exit(status);
        }
        String problem = noMain(runClass, dir);
        if (problem != null) {
            System.err.println("kiln: the build made no program to run: " + problem);
            System.exit(1);
        }
        Files.write(dir.resolve(MAIN_CLASS_FILE), (runClass + "\n").getBytes(StandardCharsets.UTF_8));
    }

    /** The judge file's package ("" if none), top-level public class and first top-level class
     * declaring a static main (null where it has none), from javac's parser; its syntax errors,
     * if any, are left for the compile that follows to report. */
    private static String[] named(JavaCompiler javac, Path file) throws IOException {
        String[] named = {"", null, null};
        StandardJavaFileManager files = javac.getStandardFileManager(null, null, StandardCharsets.UTF_8);
        JavacTask task = (JavacTask) javac.getTask(new PrintWriter(new StringWriter()), files, diagnostic -> {}, null, null, files.getJavaFileObjects(file));
        for (CompilationUnitTree unit : task.parse()) {
            if (unit.getPackageName() != null) {
                named[0] = unit.getPackageName().toString();
            }
            for (Tree type : unit.getTypeDecls()) {
                if (!(type instanceof ClassTree)) {
                    continue;
                }
                ClassTree declared = (ClassTree) type;
                String name = declared.getSimpleName().toString();
                if (named[1] == null && declared.getModifiers().getFlags().contains(javax.lang.model.element.Modifier.PUBLIC)) {
                    named[1] = name;
                }
                if (named[2] == null && declaresMain(declared)) {
                    named[2] = name;
                }
            }
        }
        return named;
    }

    private static boolean declaresMain(ClassTree type) {
        for (Tree member : type.getMembers()) {
            if (member instanceof MethodTree) {
                MethodTree method = (MethodTree) member;
                if (method.getName().contentEquals("main") && method.getModifiers().getFlags().contains(javax.lang.model.element.Modifier.STATIC)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** Why class `name` compiled into `dir` cannot be run by the java launcher (null: it can). */
    private static String noMain(String name, Path dir) throws IOException {
        Class<?> type;
        try (URLClassLoader loader = new URLClassLoader(new URL[] {dir.toUri().toURL()}, Build.class.getClassLoader())) {
            try {
                type = Class.forName(name, false, loader);
            } catch (ClassNotFoundException | LinkageError e) {
                return "no class " + name + " (the class run is the top-level public class, else the one declaring main, else Main)";
            }
            try {
                Method main = type.getMethod("main", String[].class);
                if (Modifier.isStatic(main.getModifiers()) && main.getReturnType() == void.class) {
                    return null;
                }
            } catch (NoSuchMethodException e) {
                // said below
            }
        }
        return "class " + name + " has no public static void main(String[] args)";
    }
}
