/// Why a file keyring (libsecret's file format, `FileKeyringFormat`) could not be read or written.
/// Every case carries the detail a person needs to act on it; none of them means "no items".
enum FileKeyringError: Error, Equatable {
    /// The bytes are not a keyring file this library can read: wrong header or version, a body
    /// that is not a normal-form `(uayutua(a{say}ay))`, or a size or count outside its bounds.
    /// The message says which part.
    case malformed(String)
    /// A system call on the file or its directory failed; the message names the call, the path
    /// and `strerror`.
    case io(String)
    /// libgcrypt could not be initialized or refused an operation (key derivation, cipher, MAC).
    case crypto(String)
    /// Reading the file did not finish before the operation's deadline (a large or crafted
    /// file); the message says how far it got. Nothing was written.
    case outOfTime(String)

    var message: String {
        switch self {
        case .malformed(let m): return "the file keyring is malformed: \(m)"
        case .io(let m): return "the file keyring could not be accessed: \(m)"
        case .crypto(let m): return "the file keyring's cryptography failed: \(m)"
        case .outOfTime(let m): return "the file keyring could not be read in time: \(m)"
        }
    }
}
