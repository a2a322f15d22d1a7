"""What the tests share: launching refsgd under mpiexec (:mod:`.launch`), gradients against
finite differences (:mod:`.gradcheck`), faults and signals injected into a run
(:mod:`.fault_inject`, :mod:`.signal_inject`, also run as scripts), the nesting of a Trace
Event file's spans (:mod:`.trace_nesting`). Imported as ``tests.helpers``:
``tests`` is a package, so pytest puts the repository's root on ``sys.path``."""
