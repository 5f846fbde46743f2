// A build script, so that cargo takes the [build-dependencies] above into account.
fn main() {}
