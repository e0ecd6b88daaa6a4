// kiln's C# launcher: `mcs` then `mono check/checker.exe`, in one Mono process.
//
// Usage: mono runner/run.exe [--prestarted] <output.exe> <mcs arguments...>
//
// The compiler is mcs.exe itself (found next to mscorlib), called through its library entry point
// Mono.CSharp.CompilerCallableEntryPoint.InvokeCompiler: the same parser and diagnostics as the
// `mcs` command, errors and warnings on stderr, status 1 on failure. The compiled program's entry
// point is then invoked as `mono <output.exe>` would invoke it (no arguments; its int result or
// Environment.ExitCode is the status), one runtime start cheaper. An exception escaping it is
// reported as Mono reports an unhandled exception, without this launcher's frames, status 1.
//
// --prestarted (the Makefile's `prestart`, started by kiln while a slot warms): Mono is up, mcs
// loaded; one compile of kiln's own warm-up checker (runner/warmup/, with the same options) and
// one run of it, output discarded, take the JIT and the type loading of a first compile and run
// out of the request's time. Then it waits for kiln's byte on descriptor 3, written once the
// request's files are in place, and goes on as without the flag. End-of-file instead: the slot
// was closed unused.
using System;
using System.IO;
using System.Reflection;
using System.Text;

public static class Run
{
    const string ReflectionFrame = "  at (wrapper managed-to-native) System.Reflection.RuntimeMethodInfo.InternalInvoke";

    public static int Main(string[] args)
    {
        bool prestarted = args.Length > 0 && args[0] == "--prestarted";
        if (prestarted)
        {
            var rest = new string[args.Length - 1];
            Array.Copy(args, 1, rest, 0, rest.Length);
            args = rest;
        }
        if (args.Length < 1)
        {
            Console.Error.WriteLine("usage: mono run.exe [--prestarted] <output.exe> <mcs arguments...>");
            return 2;
        }
        // UTF-8 whatever the locale (Mono takes the console's encoding from LANG/LC_ALL, which a
        // sandbox may not set): diagnostics, the program's output and its input.
        var utf8 = new UTF8Encoding(false);
        Console.OutputEncoding = utf8;
        Console.InputEncoding = utf8;
        string output = args[0];
        var mcsArgs = new string[args.Length];
        mcsArgs[0] = "-out:" + output;
        Array.Copy(args, 1, mcsArgs, 1, args.Length - 1);

        string mcsPath = Path.Combine(Path.GetDirectoryName(typeof(object).Assembly.Location), "mcs.exe");
        MethodInfo compile = Assembly.LoadFrom(mcsPath)
            .GetType("Mono.CSharp.CompilerCallableEntryPoint", true)
            .GetMethod("InvokeCompiler", new[] { typeof(string[]), typeof(TextWriter) });
        if (prestarted)
        {
            WarmUp(compile, mcsArgs);
            if (!Released())
            {
                return 0;
            }
        }
        if (!(bool) compile.Invoke(null, new object[] { mcsArgs, Console.Error }))
        {
            return 1;
        }

        MethodInfo entry = Assembly.LoadFrom(output).EntryPoint;
        if (entry == null)
        {
            Console.Error.WriteLine("Cannot find entry point for " + output);
            return 1;
        }
        object result;
        try
        {
            result = entry.Invoke(null, entry.GetParameters().Length == 0 ? null : new object[] { new string[0] });
        }
        catch (TargetInvocationException e)
        {
            string text = e.InnerException.ToString();
            int cut = text.IndexOf(ReflectionFrame, StringComparison.Ordinal);
            if (cut >= 0)
            {
                text = text.Substring(0, cut).TrimEnd('\n');
            }
            Console.Out.Flush();
            Console.Error.WriteLine("Unhandled Exception:");
            Console.Error.WriteLine(text);
            Console.Error.WriteLine("[ERROR] FATAL UNHANDLED EXCEPTION: " + text);
            return 1;
        }
        return result is int ? (int) result : Environment.ExitCode;
    }

    // The request's compile with kiln's warm-up sources in place of its own (the options, the
    // references among them, are the request's), into /tmp, then its entry point with the
    // console discarded. Nothing of it stays: the file is removed, the console and the exit code
    // set back. A warm-up that fails only leaves the request's run slower.
    static void WarmUp(MethodInfo compile, string[] mcsArgs)
    {
        string exe = "/tmp/kiln-warmup-" + Environment.TickCount + ".exe";
        var warmArgs = new System.Collections.Generic.List<string> { "-out:" + exe };
        for (int i = 1; i < mcsArgs.Length; i++)
        {
            if (mcsArgs[i].StartsWith("-", StringComparison.Ordinal))
            {
                warmArgs.Add(mcsArgs[i]);
            }
        }
        warmArgs.Add("runner/warmup/Checker.cs");
        warmArgs.Add("runner/warmup/Solution.cs");
        TextWriter stdout = Console.Out, stderr = Console.Error;
        try
        {
            if ((bool) compile.Invoke(null, new object[] { warmArgs.ToArray(), TextWriter.Null }))
            {
                Console.SetOut(TextWriter.Null);
                Console.SetError(TextWriter.Null);
                MethodInfo entry = Assembly.Load(File.ReadAllBytes(exe)).EntryPoint;
                entry.Invoke(null, entry.GetParameters().Length == 0 ? null : new object[] { new string[0] });
            }
        }
        catch (Exception)
        {
        }
        finally
        {
            Console.SetOut(stdout);
            Console.SetError(stderr);
            Environment.ExitCode = 0;
            File.Delete(exe);
        }
    }

    // Blocks until kiln's go byte on descriptor 3; false at end-of-file.
    static bool Released()
    {
        using (var go = new FileStream("/proc/self/fd/3", FileMode.Open, FileAccess.Read))
        {
            return go.ReadByte() >= 0;
        }
    }
}
