extension String {
    /// `value` in decimal ASCII digits, as `String(value)` writes it. The standard library's
    /// integer formatting is generic code that lies scattered through its 1.6 MB of text: the
    /// restore path's two numbers (a pid in a /proc path, the document version) made two more
    /// 64 KiB windows of it resident in every process (bench/results.md).
    package init(decimal value: UInt64) {
        var digits: [UInt8] = []
        var rest = value
        repeat {
            digits.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10))
            rest /= 10
        } while rest > 0
        digits.reverse()
        self.init(decoding: digits, as: UTF8.self)
    }
}
