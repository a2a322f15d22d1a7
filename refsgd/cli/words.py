"""What a command line does, from its words alone, before the parser (and NumPy) is imported."""


def is_mpi_command(argv):
    """Whether ``refsgd ARGV`` initialises MPI on every rank (train, check, bench overlap, bench codec); from the
    words alone, before the parser is imported."""
    words = [a for a in argv if not a.startswith("-")]
    if not words:
        return False
    if words[0] == "train":
        return "--list" not in argv and "-h" not in argv and "--help" not in argv
    if words[0] == "check":
        return "-h" not in argv and "--help" not in argv
    return words[0] == "bench" and len(words) > 1 and words[1] in ("overlap", "codec")
