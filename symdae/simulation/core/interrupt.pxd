# Ctrl-C in the compiled sweeps. The sweeps run without the GIL, so Python's SIGINT handler
# (which only sets a flag that the interpreter reads between bytecodes) would wait until a
# sweep returns. Every INTERRUPT_EVERY steps a sweep takes the GIL briefly and asks
# (1) PyErr_CheckSignals, which runs the handler in the main thread (KeyboardInterrupt), and
# (2) symdae.threads.stop_requested, the flag a pool sets on Ctrl-C for its worker threads
# (signals are only delivered to the main thread).
# An interrupted sweep returns the status INTERRUPTED with its step; the backend raises
# symdae.errors.Interrupted (a KeyboardInterrupt) from it, so the pending exception is cleared
# here (a def function cannot return a value with an exception set).
cdef extern from "Python.h":
    # declared here without Cython's "except -1", so that the -1 is ours to handle
    int check_signals "PyErr_CheckSignals" ()
    void PyErr_Clear()

cdef enum:
    INTERRUPTED = 4            # after newton.pxd's Status values
    INTERRUPT_EVERY = 1024     # steps between checks: ~1 us each, far below a step's cost x 1024


cdef inline bint interrupted() noexcept with gil:
    """Is a Ctrl-C pending for this thread (see the top of this file)?"""
    if check_signals() != 0:
        PyErr_Clear()
        return True
    try:
        from symdae.threads import stop_requested
        return stop_requested()
    except KeyboardInterrupt:
        # a SIGINT that arrived while stop_requested ran: its handler has run (the flag that
        # check_signals reads is spent), so this is the only sight of that Ctrl-C; escaping
        # a noexcept function it would be printed as "ignored" and the sweep would go on
        return True
    except Exception:       # an interpreter shutting down: go on
        return False
