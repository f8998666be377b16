// A layer's fade: opacity animated on the render thread (no frame read back, no CPU painting).
// Each layer names it as its `fade`; the region's layer stack (layerstack.py) calls play();
// finished() says it is over.
//
// Linear, as a cross-fade of two pictures is: every frame the render thread draws in the fade
// is a step of it. An eased curve spends its first and last tenth within a few levels of the
// two ends, where a GL that draws a 1080p frame in 30 ms (software, a small board) has a frame
// each, shown as no step at all (tests/bench/bench_stage.py counts them from the screen).
import QtQuick

OpacityAnimator {
    easing.type: Easing.Linear

    function play(begin: real, end: real, ms: int) {
        stop()
        from = begin
        to = end
        duration = ms
        start()
    }
}
