extension String {
    /// Without surrounding Unicode whitespace (spaces, tabs, line ends, U+00A0, U+2028, …): how a
    /// redirect URL, an enrolment link or a typed email address is read.
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let last = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return String(scalars[first...last])
    }
}
