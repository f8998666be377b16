// One region of the screen and its layers, fixed and declared here: the idle cover, the still
// of a web view, two pictures, two videos, and the web views made for each navigation. Today
// one region fills the screen.
//
// Every layer starts behind (z -1) at opacity 0: live but not drawn. Python (stage.py,
// kiosk.py) decides which layer is in front (its z) and fades it in (Fade.qml, on the render
// thread). Layers of the same z are drawn in the order they are declared.
//
// `tile` is this panel's own part of the region: the whole region, or on a video wall this
// panel's tile of it. The idle cover and the idle page are laid over the tile alone.
pragma ComponentBehavior: Bound
import QtQuick

Item {
    id: region

    // The stage's Python side (stage.py): asks for web views (its signal viewWanted) and is
    // handed them (its slot adopt). A Python object: `var`, as QML cannot see its type.
    required property var host
    property rect tile: Qt.rect(0, 0, width, height)

    readonly property Item cover: cover
    readonly property Item still: still
    readonly property Item pictureA: pictureA
    readonly property Item pictureB: pictureB
    readonly property Item videoA: videoA
    readonly property Item videoB: videoB

    Picture { id: pictureA; z: -1; opacity: 0 }
    Picture { id: pictureB; z: -1; opacity: 0 }
    Video { id: videoA; z: -1; opacity: 0; audio: false }
    Video { id: videoB; z: -1; opacity: 0; audio: false }
    Cover {
        id: cover
        z: -1
        opacity: 0
        visible: false
        anchors.fill: undefined
        x: region.tile.x
        y: region.tile.y
        width: region.tile.width
        height: region.tile.height
    }
    Still { id: still; z: -1; opacity: 0 }

    // The web view of one navigation: made when the stage asks, behind, not drawn until raised;
    // it ends with destroy() (deferred by QML: it may be handling one of its signals) or with
    // the scene.
    Component {
        id: webView
        WebView { z: -1; opacity: 0 }
    }
    Component {
        id: ownWebView
        WebView {
            z: -1
            opacity: 0
            anchors.fill: undefined
            x: region.tile.x
            y: region.tile.y
            width: region.tile.width
            height: region.tile.height
        }
    }
    Connections {
        target: region.host
        function onViewWanted(properties: var, own: bool) {
            region.host.adopt((own ? ownWebView : webView).createObject(region, properties))
        }
        function onViewDropped(view: Item) { view.destroy() }
    }
}
